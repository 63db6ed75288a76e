// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Re-indexing a tensor's boxes without touching its values: a slice along one dim, or one entry of the leading
// dim with that dim dropped. The result's pieces point into the same files (dataOffset moved, strides kept), so
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

} // namespace tessera
