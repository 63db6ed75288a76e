// SPDX-License-Identifier: GPL-3.0-or-later
#include "megatronranks.h"

#include "formats/layout_registry.h"

#include <QCoreApplication>

#include <algorithm>

namespace tessera::ui {

namespace {
bool isTorchDist(const tessera::CheckpointInfo& info) { return info.layout == tessera::layout_names::kMegatronDist; }

/// torch_dist: the ranks that wrote files, TP × PP × DP of them.
int distModelParallel(const tessera::CheckpointInfo& info)
{
    return info.parallel.tensorParallel * std::max(info.parallel.pipelineParallel, 1);
}
} // namespace

QString MegatronRank::coordinates(const tessera::ParallelConfig& parallel) const
{
    (void)parallel; // the grid's own axes say what to name
    QString text = QStringLiteral("TP %1 · PP %2").arg(tp).arg(pp);
    if (expertAxis)
        text += QStringLiteral(" · EP %1").arg(ep);
    if (dataParallel > 1)
        text += QStringLiteral(" · DP %1").arg(dp);
    return text;
}

bool hasMegatronRankGrid(const tessera::CheckpointInfo& info)
{
    if (info.parallel.tensorParallel <= 0)
        return false;
    if (isTorchDist(info))
        return info.parallel.worldSize > 0 && info.parallel.worldSize % distModelParallel(info) == 0;
    return tessera::hasMegatronRankFolders(info.layout);
}

int megatronDataParallel(const tessera::CheckpointInfo& info)
{
    return hasMegatronRankGrid(info) && isTorchDist(info) ? info.parallel.worldSize / distModelParallel(info) : 1;
}

std::optional<MegatronRank> megatronRank(const tessera::CheckpointInfo& info, int rank)
{
    if (!hasMegatronRankGrid(info) || rank < 0)
        return std::nullopt;
    const int tpSize = info.parallel.tensorParallel;
    const int ppSize = std::max(info.parallel.pipelineParallel, 1);
    MegatronRank r;
    if (isTorchDist(info)) {
        // Expert parallelism is carved out of the data-parallel ranks there: the grid shows DP.
        r.dataParallel = megatronDataParallel(info);
        if (rank >= info.parallel.worldSize)
            return std::nullopt;
        r.tp = rank % tpSize;
        r.dp = (rank / tpSize) % r.dataParallel;
        r.pp = rank / tpSize / r.dataParallel;
        r.folder = QCoreApplication::translate("MegatronRank", "rank %1").arg(rank);
        return r;
    }
    const int epSize = std::max(info.parallel.expertParallel, 1);
    if (rank >= tpSize * ppSize * epSize)
        return std::nullopt;
    r.expertAxis = epSize > 1;
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
