// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Re-indexing a tensor's boxes without touching its values: a slice along one dim, one entry of the leading dim
// with that dim dropped (or added), dims reordered, a dim's two halves paired. The result's pieces point into the same files (dataOffset moved, strides kept), so
// the merge engine streams them like any other checkpoint: bit-exact, with bounded memory.

#include "model/checkpoint.h"

#include <cstdint>
#include <vector>

namespace tessera {

/// The parts of `tensor`'s pieces inside [begin, begin + length) of `dim`, moved so that `begin` lands on
/// `destBegin` of that dim. Roles, files and strides are kept; empty intersections are left out.
std::vector<Piece> slicePieces(const TensorInfo& tensor, std::size_t dim, std::int64_t begin, std::int64_t length,
                               std::int64_t destBegin);

/// Entry `index` of the leading dim of `tensor`, as a tensor of one dim less named `name`.
TensorInfo selectLeading(const TensorInfo& tensor, std::int64_t index, const std::string& name);

/// The inverse: `tensor` as entry `index` of a new leading dim of `count` entries (the other entries have no
/// pieces). Another tensor's entries are added by appending its pieces.
TensorInfo placeInStack(const TensorInfo& tensor, std::int64_t index, std::int64_t count);

/// `tensor`'s dims reordered: dim d of the result is dim `order[d]` of `tensor` (a transpose is {1, 0}).
/// `order` must be a permutation of the dims.
TensorInfo permuteDims(const TensorInfo& tensor, const std::vector<std::size_t>& order);

/// A tensor whose dim 0 is two halves [a; b] of n rows each, as [n, 2, …]: entry (i, k) is row k·n + i. Its
/// row-major order is the rows interleaved (a₀, b₀, a₁, b₁, …). Dim 0 must be even.
TensorInfo pairHalves(const TensorInfo& tensor);

} // namespace tessera
