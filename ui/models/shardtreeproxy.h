// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QSortFilterProxyModel>

namespace tessera::ui {

/// Filters and sorts the shard tree: recursive name/file/rank matching (children of a match stay visible), an
/// optional "problems only" switch, and numeric sorting through SortRole.
class ShardTreeProxy : public QSortFilterProxyModel {
    Q_OBJECT
public:
    explicit ShardTreeProxy(QObject* parent = nullptr);
    ~ShardTreeProxy() override;

    void setProblemsOnly(bool problemsOnly);
    bool problemsOnly() const { return m_problemsOnly; }

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

private:
    bool m_problemsOnly = false;
};

} // namespace tessera::ui
