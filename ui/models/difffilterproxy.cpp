// SPDX-License-Identifier: GPL-3.0-or-later
#include "difffilterproxy.h"

#include "difftablemodel.h"

namespace tessera::ui {

using tessera::DiffStatus;

DiffFilterProxy::DiffFilterProxy(QObject* parent) : QSortFilterProxyModel(parent)
{
    setSortRole(SortRole);
    setFilterKeyColumn(DiffTableModel::NameColumn);
    setFilterCaseSensitivity(Qt::CaseInsensitive);
    // Streamed rows change status while the user looks at a filtered view; keep filtering and sorting live.
    setDynamicSortFilter(true);
}

DiffFilterProxy::~DiffFilterProxy() = default;

void DiffFilterProxy::setStatusFilter(StatusFilter filter)
{
    if (filter == m_status)
        return;
    m_status = filter;
    invalidateFilter();
}

QString DiffFilterProxy::filterName(StatusFilter filter)
{
    switch (filter) {
    case StatusFilter::All:
        return tr("All tensors");
    case StatusFilter::Failing:
        return tr("Not passing");
    case StatusFilter::Different:
        return tr("Different");
    case StatusFilter::WithinTolerance:
        return tr("Within tolerance");
    case StatusFilter::Identical:
        return tr("Identical");
    case StatusFilter::Missing:
        return tr("Missing or incomplete");
    case StatusFilter::Mismatch:
        return tr("Shape or dtype mismatch");
    }
    return {};
}

bool DiffFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const
{
    if (m_status != StatusFilter::All) {
        const QModelIndex index = sourceModel()->index(sourceRow, 0, sourceParent);
        const auto status = static_cast<DiffStatus>(index.data(DiffTableModel::StatusRole).toInt());
        bool accept = false;
        switch (m_status) {
        case StatusFilter::All:
            accept = true;
            break;
        case StatusFilter::Failing:
            accept = !tessera::diffStatusOk(status) && status != DiffStatus::Pending;
            break;
        case StatusFilter::Different:
            accept = status == DiffStatus::Different;
            break;
        case StatusFilter::WithinTolerance:
            accept = status == DiffStatus::WithinTolerance;
            break;
        case StatusFilter::Identical:
            accept = status == DiffStatus::Identical;
            break;
        case StatusFilter::Missing:
            accept = status == DiffStatus::MissingInA || status == DiffStatus::MissingInB
                || status == DiffStatus::Incomplete;
            break;
        case StatusFilter::Mismatch:
            accept = status == DiffStatus::ShapeMismatch || status == DiffStatus::DtypeMismatch;
            break;
        }
        if (!accept)
            return false;
    }
    return QSortFilterProxyModel::filterAcceptsRow(sourceRow, sourceParent);
}

} // namespace tessera::ui
