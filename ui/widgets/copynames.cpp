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

void addCopyNamesAction(QAbstractItemView* view, int nameColumn)
{
    auto* copy = new QAction(QObject::tr("Copy Name"), view);
    copy->setShortcut(QKeySequence::Copy);
    copy->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    QObject::connect(copy, &QAction::triggered, view, [view, nameColumn] {
        const QString names = selectedNames(view, nameColumn);
        if (!names.isEmpty())
            QGuiApplication::clipboard()->setText(names);
    });
    view->addAction(copy);
    view->setContextMenuPolicy(Qt::ActionsContextMenu);
}

} // namespace tessera::ui
