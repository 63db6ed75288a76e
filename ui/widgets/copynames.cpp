// SPDX-License-Identifier: GPL-3.0-or-later
#include "copynames.h"

#include <QAbstractItemView>
#include <QAction>
#include <QClipboard>
#include <QGuiApplication>
#include <QItemSelectionModel>
#include <QStringList>

#include <algorithm>

namespace tessera::ui {

QString selectedNames(const QAbstractItemView* view, int nameColumn)
{
    if (!view->selectionModel())
        return {};
    QModelIndexList rows = view->selectionModel()->selectedRows(nameColumn);
    if (rows.isEmpty() && view->currentIndex().isValid())
        rows << view->currentIndex().siblingAtColumn(nameColumn);
    // Selection order is click order; the view's order reads better (a tree's rows sort by their parents too).
    std::sort(rows.begin(), rows.end(), [view](const QModelIndex& a, const QModelIndex& b) {
        return view->visualRect(a).top() < view->visualRect(b).top();
    });
    QStringList names;
    for (const QModelIndex& index : rows)
        names << index.data(Qt::DisplayRole).toString();
    return names.join(QLatin1Char('\n'));
}

int copiedNameColumn(const QAbstractItemView* view, const QList<int>& nameColumns)
{
    const int current = view->currentIndex().isValid() ? view->currentIndex().column() : -1;
    return nameColumns.contains(current) ? current : nameColumns.value(0, 0);
}

void addCopyNamesAction(QAbstractItemView* view, int nameColumn)
{
    addCopyNamesAction(view, QList<int> { nameColumn });
}

void addCopyNamesAction(QAbstractItemView* view, const QList<int>& nameColumns)
{
    auto* copy = new QAction(QObject::tr("Copy Name"), view);
    copy->setShortcut(QKeySequence::Copy);
    copy->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    QObject::connect(copy, &QAction::triggered, view, [view, nameColumns] {
        const QString names = selectedNames(view, copiedNameColumn(view, nameColumns));
        if (!names.isEmpty())
            QGuiApplication::clipboard()->setText(names);
    });
    view->addAction(copy);
    view->setContextMenuPolicy(Qt::ActionsContextMenu);
}

} // namespace tessera::ui
