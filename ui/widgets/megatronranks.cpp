// SPDX-License-Identifier: GPL-3.0-or-later
#include "megatronranks.h"

#include "formats/layout_registry.h"
#include <algorithm>

namespace tessera::ui {

QString MegatronRank::coordinates(const tessera::ParallelConfig& parallel) const
{
    QString text = QStringLiteral("TP %1 · PP %2").arg(tp).arg(pp);
    if (parallel.expertParallel > 1)
        text += QStringLiteral(" · EP %1").arg(ep);
    return text;
}

bool hasMegatronRankGrid(const tessera::CheckpointInfo& info)
{
    return tessera::hasMegatronRankFolders(info.layout) && info.parallel.tensorParallel > 0;
}

std::optional<MegatronRank> megatronRank(const tessera::CheckpointInfo& info, int rank)
{
    if (!hasMegatronRankGrid(info) || rank < 0)
        return std::nullopt;
    const int tpSize = info.parallel.tensorParallel;
    const int ppSize = std::max(info.parallel.pipelineParallel, 1);
    const int epSize = std::max(info.parallel.expertParallel, 1);
    if (rank >= tpSize * ppSize * epSize)
        return std::nullopt;
    MegatronRank r;
    r.tp = rank % tpSize;
    r.ep = (rank / tpSize) % epSize;
    r.pp = rank / tpSize / epSize;
    r.folder = QStringLiteral("mp_rank_%1").arg(r.tp, 2, 10, QLatin1Char('0'));
    if (ppSize > 1)
        r.folder += QStringLiteral("_%1").arg(r.pp, 3, 10, QLatin1Char('0'));
    if (epSize > 1)
        r.folder += QStringLiteral("_%1").arg(r.ep, 3, 10, QLatin1Char('0'));
    return r;
}

} // namespace tessera::ui
