// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "merge/merge_plan.h"
#include "result.h"
#include "model/placement.h"
#include "split/split_plan.h"

#include <vector>

namespace tessera {

/// Plans `model` as FSDP2 rank files or a DCP folder: every tensor chunked along dim 0 over the last mesh dim the
/// way torch.chunk and FSDP2 do (uneven and empty shards included), replicated over the others (HSDP).
Result<SplitPlan> planShardedSplit(const MergePlan& model, const SplitOptions& options);

/// FSDP2's placements on `mesh`: Shard(0) over the last dim, Replicate() over the others.
std::vector<Placement> fsdpPlacements(const Shape& mesh);

/// Rank `rank`'s part of model tensor `index` (`src`) in an FSDP2 plan: a DTensor of its fsdpPlacements() on the
/// plan's mesh (its storage padded as FSDP2 pads a parameter's when `padded`; compact, as an optimizer's state is,
/// otherwise).
/// Rank `rank`'s chunk of model tensor `index` (`src`) in a DCP plan: its rows of a Shard(0) over the ranks.
Result<SplitTensor> dcpRankTensor(const PlannedTensor& src, std::size_t index, const SplitPlan& plan, int rank);

Result<SplitTensor> fsdpRankTensor(const PlannedTensor& src, std::size_t index, const SplitPlan& plan, int rank,
                                   bool padded);

} // namespace tessera
