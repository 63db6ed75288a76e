// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Fusing a LoRA update into its weight while the weight streams through the merge: W' = W + (B·A)·scale, computed
// in fp32 and rounded once to the output dtype, as PEFT's merge_and_unload does. Only the weight (plus an fp32
// working copy where the output dtype is narrower) and its two small factors are ever in memory.

#include "merge/merge_plan.h"
#include "merge/source_files.h"
#include "result.h"

#include <cstdint>
#include <functional>

namespace tessera {

/// The plan of a LoRA update for `weight` (already planned as `planned`), its factors read in fp32. Checks the
/// shapes fit: W [out, in], A [r, in], B [out, r] (transposed, an embedding's: W [num, dim], A [r, num], B [dim, r]).
Result<PlannedDelta> planLoraDelta(const PlannedTensor& planned, const TensorInfo& weight, const TensorInfo& a,
                                   std::size_t aIndex, const TensorInfo& b, std::size_t bIndex, double scale,
                                   bool transposed);

/// Memory the fused tensor needs while it is built: the output, the fp32 working copy or tile, the factors.
std::uint64_t loraFuseBufferBytes(const PlannedTensor& planned);

/// Builds the fused weight `planned` (which has a delta) into `dst` (`planned.bytes`, in `planned.dtype`).
Status materializeFused(SourceFiles& files, const TensorInfo& weight, const PlannedTensor& planned, std::uint8_t* dst,
                        const std::function<bool()>& canceled);

/// Adds (C·M)·scale to the rows [0, rows) of `w` ([rows, cols], fp32): C is [rows, r], M is [r, cols]. Each dot
/// product is summed exactly enough to round once to fp32 (double accumulation), then scaled and added in fp32.
/// Spreads the rows over `threads` threads; returns false when `canceled` said so between row blocks.
bool addLowRankProduct(float* w, std::int64_t rows, std::int64_t cols, const float* c, const float* m, std::int64_t r,
                       float scale, unsigned threads, const std::function<bool()>& canceled = {});

} // namespace tessera
