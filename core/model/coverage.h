// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

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

} // namespace tessera
