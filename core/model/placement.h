// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// One DTensor placement: what a tensor does along one mesh dim.
struct Placement {
    enum class Kind {
        Shard,        ///< torch.chunk along `dim` over the mesh dim
        StridedShard, ///< torch's `_StridedShard(dim, split_factor)` (FSDP2 + TP right-to-left sharding)
        Replicate,    ///< every coordinate holds the same data
        Partial,      ///< every coordinate holds an addend (per `reduceOp`) of the data
    };
    Kind kind = Kind::Replicate;
    int dim = 0;                     ///< tensor dim, for Shard and StridedShard
    std::int64_t splitFactor = 1;    ///< for StridedShard
    std::string reduceOp = "sum";    ///< for Partial

    static Placement shard(int dim) { return Placement { Kind::Shard, dim, 1, "sum" }; }
    static Placement stridedShard(int dim, std::int64_t splitFactor)
    {
        return Placement { Kind::StridedShard, dim, splitFactor, "sum" };
    }
    static Placement replicate() { return Placement { Kind::Replicate, 0, 1, "sum" }; }
    static Placement partial(std::string reduceOp = "sum") { return Placement { Kind::Partial, 0, 1, std::move(reduceOp) }; }

    /// "Shard(0)", "_StridedShard(dim=0, sf=2)", "Replicate()", "Partial(sum)".
    std::string text() const;
    bool operator==(const Placement& other) const;
    bool operator!=(const Placement& other) const { return !(*this == other); }
};

/// One contiguous box of a rank's local tensor inside the global tensor.
struct LocalBox {
    Shape globalOffsets; ///< where the box starts in the global tensor
    Shape shape;         ///< box shape
    Shape localOffsets;  ///< where this box starts inside the rank's local tensor
};

/// Where one mesh coordinate's local tensor lives in the global tensor.
struct LocalLayout {
    Shape localShape;
    /// Usually one box; several when a lone `_StridedShard` interleaves the local tensor in the global one;
    /// empty when the local shard is empty. Boxes are in row-major order of their local offsets.
    std::vector<LocalBox> boxes;
    /// What torch's `compute_local_shape_and_global_offset` reports (and DCP records as the chunk offset):
    /// the global position of the local tensor's first element, and for a dim where the shard is empty the
    /// global size of that dim (out of bounds on purpose, as torch ≥ 2.5 does).
    Shape globalOffset;
    bool isReplica = false; ///< not the first holder of its data along the Replicate mesh dims
    bool isPartial = false; ///< holds an addend of a Partial placement
};

/// A chunk of a dim split with `torch.chunk` semantics.
struct ChunkRange {
    std::int64_t offset = 0; ///< start of the chunk; clamped to the dim size for empty trailing chunks
    std::int64_t size = 0;
};

/// Chunk `c` of a dim of `size` elements split `n` ways the way `torch.chunk` does:
/// full = ceil(size/n), chunk c is [full·c, min(size, full·(c+1))), possibly empty.
/// Requires n ≥ 1 and 0 ≤ c < n.
ChunkRange chunkRange(std::int64_t size, std::int64_t n, std::int64_t c);

/// Computes the local shape and the global boxes of the shard held at `coordinate` of a mesh of
/// `meshShape`, for a tensor of `globalShape` with one placement per mesh dim. Follows torch's
/// `_compute_local_shape_and_global_offset` with `_explicit_order_placements`: shards apply in mesh-dim
/// order, except that a run of `_StridedShard(d, sf)` followed by `Shard(d)` is applied after that Shard
/// (innermost first, each sf must equal the product of the mesh sizes sharded after it). A `_StridedShard`
/// not followed by a `Shard` on its dim splits the way `_StridedShard._split_tensor` does, which makes the
/// local tensor several interleaved boxes.
Result<LocalLayout> computeLocalLayout(const Shape& globalShape, const Shape& meshShape, const Shape& coordinate,
                                       const std::vector<Placement>& placements);

/// "(Replicate(), Shard(0)) on ddp=2 × fsdp=2"; a single placement drops the parentheses
/// ("Shard(0) on fsdp=4"). Without dim names the mesh is written "mesh 2 × 2".
std::string describePlacements(const std::vector<Placement>& placements, const Shape& meshShape,
                               const std::vector<std::string>& dimNames);

/// "[0:4, 2:8]": a box as half-open ranges per dim ("[]" for a 0-dim box).
std::string boxText(const Shape& offsets, const Shape& shape);

} // namespace tessera
