// SPDX-License-Identifier: GPL-3.0-or-later
#include "mappingfilterproxy.h"

#include "mappingmodel.h"

namespace tessera::ui {

MappingFilterProxy::MappingFilterProxy(QObject* parent) : QSortFilterProxyModel(parent)
{
    setSortRole(SortRole);
    setFilterKeyColumn(-1);
    setFilterCaseSensitivity(Qt::CaseInsensitive);
}

MappingFilterProxy::~MappingFilterProxy() = default;

void MappingFilterProxy::setStatusFilter(int filter)
{
    if (filter == m_status)
        return;
    m_status = filter;
    invalidateRowsFilter();
}

bool MappingFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const
{
    if (m_status != AllStatuses) {
        const auto status = tessera::MappingStatus(
            sourceModel()->index(sourceRow, 0, sourceParent).data(MappingModel::StatusRole).toInt());
        if (m_status == ProblemStatuses ? !MappingModel::isProblem(status) : int(status) != m_status)
            return false;
    }
    return QSortFilterProxyModel::filterAcceptsRow(sourceRow, sourceParent);
}

} // namespace tessera::ui
