// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <QString>

#include <optional>

namespace tessera::ui {

/// Where a rank of a Megatron per-rank checkpoint (verl's legacy layout, Megatron-LM's iter_*) sits in the
/// model-parallel grid, and the mp_rank_* folder that holds its file.
struct MegatronRank {
    int tp = 0;
    int pp = 0;
    int ep = 0;
    QString folder; ///< "mp_rank_01_000"
    /// "TP 1 · PP 0" (with "· EP e" when the checkpoint has expert parallelism).
    QString coordinates(const tessera::ParallelConfig& parallel) const;
};

/// True for the layouts whose ranks are mp_rank_* folders on a TP × PP (× EP) grid.
bool hasMegatronRankGrid(const tessera::CheckpointInfo& info);

/// The grid position of `rank` as the Megatron reader numbers pieces ((pp·EP + ep)·TP + tp), with the folder
/// name Megatron gives it (_PPP only when PP > 1, _EEE only when EP > 1); nullopt outside the grid or for other
/// layouts.
std::optional<MegatronRank> megatronRank(const tessera::CheckpointInfo& info, int rank);

} // namespace tessera::ui
