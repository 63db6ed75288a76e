// SPDX-License-Identifier: GPL-3.0-or-later
#include "shardtreeproxy.h"

#include "roles.h"
#include "shardtreemodel.h"

namespace tessera::ui {

ShardTreeProxy::ShardTreeProxy(QObject* parent) : QSortFilterProxyModel(parent)
{
    setRecursiveFilteringEnabled(true);
    setAutoAcceptChildRows(true);
    setSortRole(SortRole);
    setFilterCaseSensitivity(Qt::CaseInsensitive);
}

ShardTreeProxy::~ShardTreeProxy() = default;

void ShardTreeProxy::setProblemsOnly(bool problemsOnly)
{
    if (problemsOnly == m_problemsOnly)
        return;
    m_problemsOnly = problemsOnly;
    invalidateRowsFilter();
}

bool ShardTreeProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const
{
    const QModelIndex index = sourceModel()->index(sourceRow, 0, sourceParent);
    if (m_problemsOnly && index.data(ProblemRole).toString().isEmpty())
        return false;
    const QRegularExpression re = filterRegularExpression();
    if (re.pattern().isEmpty())
        return true;
    // The name column, and for pieces the placement column (which names the box and file).
    for (const int column : { int(ShardTreeModel::NameColumn), int(ShardTreeModel::PlacementColumn) }) {
        if (re.match(sourceModel()->index(sourceRow, column, sourceParent).data().toString()).hasMatch())
            return true;
    }
    return false;
}

} // namespace tessera::ui
