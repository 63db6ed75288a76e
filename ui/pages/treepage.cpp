// SPDX-License-Identifier: GPL-3.0-or-later
#include "treepage.h"

#include "coreconvert.h"
#include "models/roles.h"
#include "models/shardtreeproxy.h"
#include "widgets/columnfitter.h"
#include "widgets/copynames.h"
#include "widgets/filterbar.h"
#include "widgets/rankcolors.h"
#include "widgets/tensornameelide.h"

#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QEvent>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QTreeView>
#include <QVBoxLayout>

#include <algorithm>

namespace tessera::ui {

TreePage::TreePage(QWidget* parent)
    : QWidget(parent)
    , m_model(new ShardTreeModel(this))
    , m_proxy(new ShardTreeProxy(this))
    , m_filter(new FilterBar(this))
    , m_groupBy(new QComboBox(this))
    , m_problemsOnly(new QCheckBox(tr("Problems only"), this))
    , m_view(new QTreeView(this))
    , m_count(new QLabel(this))
    , m_names(new TensorNameDelegate(this))
{
    m_proxy->setSourceModel(m_model);
    m_groupBy->addItem(tr("By file"), int(ShardTreeModel::GroupBy::File));
    m_groupBy->addItem(tr("By tensor"), int(ShardTreeModel::GroupBy::Tensor));
    m_groupBy->setToolTip(tr("Group tensors under the files (ranks) that hold them, or list each tensor once with all its pieces"));
    m_problemsOnly->setToolTip(tr("Show only rows with problems"));

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    // The filter has a row of its own: beside the grouping and "Problems only" it was a few letters wide in a
    // narrow pane.
    layout->addWidget(m_filter);
    auto* bar = new QHBoxLayout;
    bar->addWidget(m_groupBy);
    bar->addWidget(m_problemsOnly);
    bar->addStretch(1);
    layout->addLayout(bar);
    layout->addWidget(m_view, 1);
    layout->addWidget(m_count);

    m_view->setModel(m_proxy);
    // Uniform heights let QTreeView lay out 100,000 rows without measuring each one.
    m_view->setUniformRowHeights(true);
    m_view->setAlternatingRowColors(true);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(-1, Qt::AscendingOrder); // checkpoint order until the user sorts
    m_view->header()->setStretchLastSection(true);
    m_view->header()->setSectionsMovable(true);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setTextElideMode(Qt::ElideMiddle);
    m_view->setItemDelegateForColumn(ShardTreeModel::NameColumn, m_names);
    addCopyNamesAction(m_view, ShardTreeModel::NameColumn);
    auto* statistics = new QAction(tr("Statistics…"), m_view);
    statistics->setToolTip(tr("Min, max, mean, std, NaN, Inf, zeros and a histogram of the current tensor"));
    connect(statistics, &QAction::triggered, this, [this] {
        const int tensor = m_view->currentIndex().data(TensorIndexRole).toInt();
        if (m_view->currentIndex().isValid() && tensor >= 0)
            Q_EMIT statisticsRequested(tensor);
    });
    m_view->addAction(statistics);
    m_view->setAllColumnsShowFocus(true);
    adjustColumns();

    connect(m_filter, &FilterBar::filterChanged, this, [this](const QRegularExpression& re) {
        changeFilter([&] { m_proxy->setFilterRegularExpression(re); });
    });
    connect(m_filter, &FilterBar::invalidRegex, this, [this](const QString& why) {
        m_count->setText(tr("No rows: the regex is invalid (%1)").arg(why));
    });
    connect(m_problemsOnly, &QCheckBox::toggled, this, [this](bool on) {
        changeFilter([&] { m_proxy->setProblemsOnly(on); });
    });
    connect(m_groupBy, &QComboBox::currentIndexChanged, this, [this] {
        const auto mode = static_cast<ShardTreeModel::GroupBy>(m_groupBy->currentData().toInt());
        m_model->setGroupBy(mode);
        expandDefault();
        Q_EMIT groupByChanged(mode);
    });
    connect(m_view->selectionModel(), &QItemSelectionModel::currentChanged, this,
            [this](const QModelIndex& current) { onCurrentChanged(current); });
    connect(m_proxy, &QAbstractItemModel::modelReset, this, &TreePage::updateCount);
    m_model->setProblemColor(problemColor(palette()));
    updateCount();
}

TreePage::~TreePage() = default;

void TreePage::adjustColumns()
{
    const QFontMetrics fm(font());
    auto* header = m_view->header();
    const int nameWidth = fm.horizontalAdvance(QStringLiteral("model.layers.0.post_attention_layernorm.weight")) + 130;
    header->resizeSection(ShardTreeModel::NameColumn, nameWidth);
    // A pane narrower than that shows whole (shortened) names; the other columns are a scroll away.
    if (!m_nameColumn)
        m_nameColumn = new ColumnFitter(m_view, header, { ShardTreeModel::NameColumn }, nameWidth);
    m_nameColumn->fit();
    // Sizes print with up to three significant digits, a point and a unit: the widest of those fits whole.
    int sizeWidth = fm.horizontalAdvance(m_model->headerData(ShardTreeModel::SizeColumn, Qt::Horizontal).toString());
    for (const char* digits : { "8.88", "88.8", "888" })
        for (const char* unit : { " B", " KB", " MB", " GB", " TB", " PB", " EB" })
            sizeWidth = std::max(sizeWidth, fm.horizontalAdvance(QLatin1String(digits) + QLatin1String(unit)));
    header->resizeSection(ShardTreeModel::SizeColumn, sizeWidth + 24);
    m_nameColumn->setKeptInView({ ShardTreeModel::SizeColumn });
    header->resizeSection(ShardTreeModel::DTypeColumn, fm.horizontalAdvance(QStringLiteral("DType")) + 20);
    header->resizeSection(ShardTreeModel::ShapeColumn, fm.horizontalAdvance(QStringLiteral("[151936, 4096]")) + 16);
    header->resizeSection(ShardTreeModel::PlacementColumn, fm.horizontalAdvance(QStringLiteral("[0:151936, 0:4096] · replica")) + 16);
}

void TreePage::setCheckpoint(CheckpointPtr checkpoint)
{
    QStringList names;
    if (checkpoint)
        for (const auto& tensor : checkpoint->tensors)
            names << qs(tensor.name);
    m_names->setSharedPrefix(sharedNamePrefix(names));
    m_model->setCheckpoint(std::move(checkpoint));
    // Tensor rows are indented under the checkpoint's folders and, by file, under their file: the names need that
    // much more.
    int depth = 0;
    for (QModelIndex i = m_model->indexForTensor(0); i.isValid(); i = i.parent())
        ++depth;
    m_nameColumn->setMinimumWidth(compactNamesWidth(names, m_names->sharedPrefix(), QFontMetrics(m_view->font()))
                                  + depth * m_view->indentation());
    m_mergeNote.clear(); // the last checkpoint's; this one's comes with its merge plan
    expandDefault();
    m_view->scrollToTop(); // the rows the last checkpoint's scroll position pointed at are gone
    updateCount();
}

void TreePage::setGroupBy(ShardTreeModel::GroupBy groupBy)
{
    m_groupBy->setCurrentIndex(m_groupBy->findData(int(groupBy)));
}

ShardTreeModel::GroupBy TreePage::groupBy() const { return m_model->groupBy(); }

void TreePage::collectExpanded(const QModelIndex& parent, QList<QPersistentModelIndex>& out) const
{
    for (int r = 0; r < m_proxy->rowCount(parent); ++r) {
        const QModelIndex child = m_proxy->index(r, 0, parent);
        if (!m_view->isExpanded(child))
            continue;
        out << QPersistentModelIndex(m_proxy->mapToSource(child));
        collectExpanded(child, out);
    }
}

void TreePage::changeFilter(const std::function<void()>& change)
{
    const bool wasFiltering = m_filtering;
    if (!wasFiltering) {
        // The user's own view, to come back to when the filter is cleared.
        m_expandedBeforeFilter.clear();
        collectExpanded({}, m_expandedBeforeFilter);
    }
    const QPersistentModelIndex current(m_proxy->mapToSource(m_view->currentIndex()));
    change();
    m_filtering = !m_proxy->filterRegularExpression().pattern().isEmpty() || m_proxy->problemsOnly();
    if (m_filtering) {
        m_view->expandToDepth(m_proxy->problemsOnly() ? 3 : 2); // matches are shown, not hidden in closed rows
    } else if (wasFiltering) {
        m_view->collapseAll();
        for (const auto& source : m_expandedBeforeFilter)
            m_view->expand(m_proxy->mapFromSource(source));
    }
    QModelIndex again = current.isValid() ? m_proxy->mapFromSource(current) : QModelIndex();
    // A selection the filter hides moves to the first tensor it shows, so the Placement view follows the filter
    // instead of showing a tensor the tree no longer lists.
    if (!again.isValid() && m_filtering)
        again = firstTensorRow({});
    if (again.isValid()) {
        m_view->selectionModel()->setCurrentIndex(again, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        m_view->scrollTo(again);
    } else if (current.isValid()) {
        m_view->selectionModel()->clear();
        Q_EMIT currentTensorChanged(-1, -1);
    }
    updateCount();
}

QModelIndex TreePage::firstTensorRow(const QModelIndex& parent) const
{
    for (int r = 0; r < m_proxy->rowCount(parent); ++r) {
        const QModelIndex child = m_proxy->index(r, 0, parent);
        if (child.data(TensorIndexRole).toInt() >= 0)
            return child;
        if (const QModelIndex found = firstTensorRow(child); found.isValid())
            return found;
    }
    return {};
}

void TreePage::expandDefault()
{
    const QModelIndex checkpoint = m_proxy->mapFromSource(m_model->checkpointIndex());
    if (!checkpoint.isValid())
        return;
    for (QModelIndex i = checkpoint; i.isValid(); i = i.parent())
        m_view->expand(i);
    if (m_model->groupBy() == ShardTreeModel::GroupBy::File && m_proxy->rowCount(checkpoint) > 0)
        m_view->expand(m_proxy->index(0, 0, checkpoint));
}

void TreePage::selectTensor(int tensorIndex)
{
    QModelIndex index = m_proxy->mapFromSource(m_model->indexForTensor(tensorIndex));
    if (!index.isValid())
        return;
    m_view->setCurrentIndex(index);
    m_view->scrollTo(index, QAbstractItemView::PositionAtCenter);
}

void TreePage::focusFilter()
{
    m_filter->lineEdit()->setFocus(Qt::ShortcutFocusReason);
    m_filter->lineEdit()->selectAll();
}

void TreePage::onCurrentChanged(const QModelIndex& current)
{
    if (!current.isValid()) {
        Q_EMIT currentTensorChanged(-1, -1);
        return;
    }
    Q_EMIT currentTensorChanged(current.data(TensorIndexRole).toInt(), current.data(PieceIndexRole).toInt());
}

void TreePage::updateCount()
{
    const int total = m_model->tensorCount();
    if (total == 0) {
        m_count->setText(tr("No checkpoint loaded"));
        return;
    }
    const auto* checkpoint = m_model->checkpoint().get();
    const QString problems = checkpoint->problems.empty()
        ? tr("no problems")
        : countText(static_cast<long long>(checkpoint->problems.size()), tr("problem"), tr("problems"));
    const bool filtered = !m_proxy->filterRegularExpression().pattern().isEmpty() || m_proxy->problemsOnly();
    QString text = tr("%1 tensors · %2").arg(total).arg(problems);
    if (!m_mergeNote.isEmpty())
        text += QStringLiteral(" · ") + m_mergeNote;
    if (filtered)
        text += tr(" · filtered");
    m_count->setText(text);
}

void TreePage::setMergeNote(const QString& note)
{
    if (note == m_mergeNote)
        return;
    m_mergeNote = note;
    updateCount();
}

void TreePage::changeEvent(QEvent* event)
{
    if (event->type() == QEvent::PaletteChange) {
        m_model->setProblemColor(problemColor(palette()));
        m_view->viewport()->update();
    } else if (event->type() == QEvent::FontChange) {
        adjustColumns();
    }
    QWidget::changeEvent(event);
}

} // namespace tessera::ui
