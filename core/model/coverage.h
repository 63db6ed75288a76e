// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// Checks how a tensor's pieces cover its global shape; returns one plain-English message per problem, empty
/// when the pieces tile the tensor. Checked, naming ranks, files and boxes:
/// - a piece whose offsets/shape rank differs from the tensor's, or with negative sizes;
/// - a piece reaching outside the tensor;
/// - Primary pieces (and Partial-term boxes) that overlap one another;
/// - elements no Primary piece or Partial-term group covers (the first uncovered box and the missing count);
/// - Replica pieces whose box matches no Primary piece or Partial-term box;
/// - Partial-term groups (pieces summed over the same box) with different numbers of terms.
/// Pieces with a zero-size box are ignored (DCP records empty shards at out-of-bounds offsets). A 0-dim
/// tensor is covered by one piece with empty offsets and shape. Never enumerates elements: overlaps are found by
/// sorting and sweeping boxes along their most finely split dim, gaps by comparing volumes and bisecting at
/// box boundaries, so thousands of pieces take milliseconds. At most a few messages of each kind are listed.
std::vector<std::string> checkCoverage(const TensorInfo& tensor);

/// Only checkCoverage()'s gap message ("no piece provides box …; N of M elements are missing in all"), empty when
/// every element is provided. For a checkpoint with unreadable or missing ranks, where the other findings are
/// the absent rank's echo and only the gap says which tensors are incomplete.
std::string checkGaps(const TensorInfo& tensor);

/// The elements of `tensor` that no piece provides (a missing or truncated rank): the gaps a gather would leave
/// as zeros. Empty when the Primary pieces and Partial-term boxes cover every element (the usual case, decided
/// from box volumes without touching elements); otherwise one byte per element in row-major order, 1 where the
/// element is missing, and `missing` their count. Costs one byte per element only for a tensor with gaps.
std::vector<std::uint8_t> missingElementMask(const TensorInfo& tensor, std::uint64_t& missing);

} // namespace tessera
