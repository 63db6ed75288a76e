// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "models/shardtreemodel.h"

#include <QList>
#include <QPersistentModelIndex>
#include <QWidget>

#include <functional>

class QCheckBox;
class QComboBox;
class QLabel;
class QTreeView;

namespace tessera::ui {

class ColumnFitter;
class TensorNameDelegate;

class FilterBar;
class ShardTreeProxy;

/// The shard tree with its filter bar, grouping choice and "problems only" switch.
class TreePage : public QWidget {
    Q_OBJECT
public:
    explicit TreePage(QWidget* parent = nullptr);
    ~TreePage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    void setGroupBy(ShardTreeModel::GroupBy groupBy);
    ShardTreeModel::GroupBy groupBy() const;
    /// Selects (and scrolls to) the first row of tensor `tensorIndex`.
    void selectTensor(int tensorIndex);
    /// Expands the checkpoint and its first group so a fresh load shows tensors, not one collapsed line.
    void expandDefault();
    void focusFilter();
    /// What a merge would refuse ("a merge would refuse it (12 mapping problems)"), shown beside the problem count;
    /// empty when it would not.
    void setMergeNote(const QString& note);

    ShardTreeModel* model() const { return m_model; }
    ShardTreeProxy* proxy() const { return m_proxy; }
    QTreeView* view() const { return m_view; }
    FilterBar* filterBar() const { return m_filter; }

Q_SIGNALS:
    /// The current row stands for tensor `tensorIndex` (-1 if none) and, for piece rows, piece `pieceIndex`.
    void currentTensorChanged(int tensorIndex, int pieceIndex);
    /// The user asked for the current tensor's statistics (context menu: Statistics…).
    void statisticsRequested(int tensorIndex);
    void groupByChanged(tessera::ui::ShardTreeModel::GroupBy groupBy);

protected:
    void changeEvent(QEvent* event) override;

private:
    /// The first row (depth first) under `parent` that stands for a tensor, in the filtered tree.
    QModelIndex firstTensorRow(const QModelIndex& parent) const;
    /// Runs a filter change keeping what the user sees: the current row stays current and visible, and clearing
    /// the filter brings back the rows the user had expanded before.
    void changeFilter(const std::function<void()>& change);
    /// Source indices of the expanded rows under `parent` (proxy), expanded rows only.
    void collectExpanded(const QModelIndex& parent, QList<QPersistentModelIndex>& out) const;
    void onCurrentChanged(const QModelIndex& current);
    void updateCount();
    void adjustColumns();

    ShardTreeModel* m_model;
    ShardTreeProxy* m_proxy;
    FilterBar* m_filter;
    QComboBox* m_groupBy;
    QCheckBox* m_problemsOnly;
    QTreeView* m_view;
    QLabel* m_count;
    TensorNameDelegate* m_names;
    ColumnFitter* m_nameColumn = nullptr;
    /// The user's expansion before a filter was applied, restored when the filter is cleared (source indices).
    QList<QPersistentModelIndex> m_expandedBeforeFilter;
    bool m_filtering = false;
    QString m_mergeNote;
};

} // namespace tessera::ui
