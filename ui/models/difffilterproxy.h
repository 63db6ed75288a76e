// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QSortFilterProxyModel>

namespace tessera::ui {

/// Filters the diff table by status group and tensor name (the name filter is the proxy's regular expression on
/// the name column), and sorts by DiffTableModel's raw SortRole values.
class DiffFilterProxy : public QSortFilterProxyModel {
    Q_OBJECT
public:
    enum class StatusFilter { All, Failing, Different, WithinTolerance, Identical, Missing, Mismatch };

    explicit DiffFilterProxy(QObject* parent = nullptr);
    ~DiffFilterProxy() override;

    void setStatusFilter(StatusFilter filter);
    StatusFilter statusFilter() const { return m_status; }
    static QString filterName(StatusFilter filter);

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

private:
    StatusFilter m_status = StatusFilter::All;
};

} // namespace tessera::ui
