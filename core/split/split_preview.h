// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "merge/merge_plan.h"
#include "model/checkpoint.h"
#include "split/split_plan.h"

namespace tessera {

/// What a split will write, described as a checkpoint in the model's own names before anything is written:
/// every model tensor with one piece per box an output rank holds (rank, box in the model tensor, file), the
/// later holders of a box already held marked Replica (HSDP's replicated dims, TP-replicated norms, non-expert
/// tensors on every expert rank). The workbench draws it with the placement view. No piece has bytes to read.
CheckpointInfo splitPlacementPreview(const SplitPlan& plan, const MergePlan& model);

/// True for what splitPlacementPreview() made: its pieces name the files and keys they will be written to.
bool isSplitPlacementPreview(const CheckpointInfo& info);

} // namespace tessera
