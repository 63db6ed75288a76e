// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "merge/merge_plan.h"
#include "result.h"
#include "split/split_plan.h"

namespace tessera {

/// Plans `model` as FSDP2 rank files or a DCP folder: every tensor chunked along dim 0 over the last mesh dim the
/// way torch.chunk and FSDP2 do (uneven and empty shards included), replicated over the others (HSDP).
Result<SplitPlan> planShardedSplit(const MergePlan& model, const SplitOptions& options);

} // namespace tessera
