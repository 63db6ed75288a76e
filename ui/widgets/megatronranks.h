// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <QString>

#include <optional>

namespace tessera::ui {

/// Where a rank of a Megatron checkpoint sits in the model-parallel grid: for the per-rank layouts (verl's legacy
/// layout, Megatron-LM's iter_*) with the mp_rank_* folder that holds its file, for torch_dist with the global
/// rank that wrote its __R_*.distcp file.
struct MegatronRank {
    int tp = 0;
    int pp = 0;
    int ep = 0;
    int dp = 0;
    int dataParallel = 1; ///< DP size of the grid: torch_dist ranks include their data-parallel replicas
    bool expertAxis = false; ///< the grid has an EP axis (per-rank layouts with expert parallelism)
    QString folder; ///< "mp_rank_01_000", or "rank 3" for torch_dist
    /// "TP 1 · PP 0" (with "· EP e" when the checkpoint has expert parallelism, "· DP d" when data parallelism).
    QString coordinates(const tessera::ParallelConfig& parallel) const;
};

/// True for the layouts whose ranks sit on a TP × PP (× EP, × DP) grid: mp_rank_* folders, and torch_dist when its
/// world size is a multiple of TP × PP.
bool hasMegatronRankGrid(const tessera::CheckpointInfo& info);

/// The size of the data-parallel axis of the grid: 1 for the per-rank layouts (one file per model-parallel rank),
/// world size / (TP × PP) for torch_dist.
int megatronDataParallel(const tessera::CheckpointInfo& info);

/// The grid position of `rank`: for the per-rank layouts as the Megatron reader numbers pieces
/// ((pp·EP + ep)·TP + tp), with the folder name Megatron gives it (_PPP only when PP > 1, _EEE only when EP > 1);
/// for torch_dist in Megatron's default rank order (TP fastest, then DP, then PP). nullopt outside the grid or for
/// other layouts.
std::optional<MegatronRank> megatronRank(const tessera::CheckpointInfo& info, int rank);

} // namespace tessera::ui
