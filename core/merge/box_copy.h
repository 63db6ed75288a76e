// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <cstdint>
#include <functional>

namespace tessera {

/// Calls `run(srcElem, dstElem, count)` for every maximal run of elements of a box of `shape` that is
/// contiguous both in the source (element strides `srcStrides`) and in the destination (`dstStrides`),
/// in row-major order. Trailing dims that are contiguous on both sides are merged into one run, so a
/// contiguous box gives a single call and a row-sharded box one call per row. A 0-dim box gives one run of
/// one element; a box with a zero-size dim gives none. Offsets are in elements from the box's first element.
void forEachRun(const Shape& shape, const Shape& srcStrides, const Shape& dstStrides,
                const std::function<void(std::uint64_t srcElem, std::uint64_t dstElem, std::uint64_t count)>& run);

/// Copies a strided box of `elementSize`-byte elements from `src` into `dst` (both pointing at the box's
/// first element) by memcpy of the innermost contiguous runs — never element by element unless the
/// source itself is transposed.
void copyBox(const std::uint8_t* src, const Shape& srcStrides, const Shape& shape, std::size_t elementSize,
             std::uint8_t* dst, const Shape& dstStrides);

/// Row-major element strides of a box of `shape` placed inside a tensor of `globalShape`.
Shape globalStrides(const Shape& globalShape);

/// Element offset of position `offsets` in a row-major tensor with `strides`.
std::uint64_t elementOffset(const Shape& offsets, const Shape& strides);

/// True when the box [offsets, offsets+shape) of a row-major tensor of `globalShape` is one contiguous
/// element range (e.g. a block of whole rows: the FSDP Shard(0) case).
bool boxIsContiguousInTensor(const Shape& offsets, const Shape& shape, const Shape& globalShape);

/// True when `strides` are row-major contiguous for `shape` (dims of size 1 may have any stride).
bool isContiguous(const Shape& shape, const Shape& strides);

/// Bytes from the first to one past the last element a strided box touches (0 for an empty box).
std::uint64_t boxSpanBytes(const Shape& shape, const Shape& strides, std::size_t elementSize);

} // namespace tessera
