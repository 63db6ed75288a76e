// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QSortFilterProxyModel>

namespace tessera::ui {

/// The mapping table filtered by status (one status, every problem, or all) and by text over every column.
class MappingFilterProxy : public QSortFilterProxyModel {
    Q_OBJECT
public:
    /// Besides a tessera::MappingStatus value: no status filter, or every status MappingModel::isProblem.
    enum StatusFilter { AllStatuses = -1, ProblemStatuses = -2 };

    explicit MappingFilterProxy(QObject* parent = nullptr);
    ~MappingFilterProxy() override;

    /// AllStatuses, ProblemStatuses or an int(tessera::MappingStatus).
    void setStatusFilter(int filter);
    int statusFilter() const { return m_status; }

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

private:
    int m_status = AllStatuses;
};

} // namespace tessera::ui
