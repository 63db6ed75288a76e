// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <cstdint>

namespace tessera {

namespace detail {

/// forEachRun() over `rank` dims given as arrays. It allocates nothing (runs inside guarded reads, which a bus
/// error leaves without destroying anything): the outer dims it counts through are those longer than 1, at most
/// 63 in a box whose elements fit in 64 bits, so their counters fit on the stack.
template <typename Run>
void forEachRunOf(const std::int64_t* shape, const std::int64_t* srcStrides, const std::int64_t* dstStrides,
                  std::size_t rank, Run&& run)
{
    for (std::size_t d = 0; d < rank; ++d)
        if (shape[d] <= 0)
            return;
    // Merge trailing dims while both sides stay contiguous: the run covers dims [inner, rank).
    std::size_t inner = rank;
    std::int64_t runLength = 1;
    while (inner > 0) {
        const std::size_t d = inner - 1;
        const bool srcOk = shape[d] == 1 || srcStrides[d] == runLength;
        const bool dstOk = shape[d] == 1 || dstStrides[d] == runLength;
        if (!srcOk || !dstOk)
            break;
        runLength *= shape[d];
        --inner;
    }
    const auto count = static_cast<std::uint64_t>(runLength);
    constexpr std::size_t kStackDims = 64;
    std::size_t dims[kStackDims];
    std::int64_t index[kStackDims];
    std::size_t n = 0;
    for (std::size_t d = 0; d < inner; ++d)
        if (shape[d] > 1) {
            if (n == kStackDims)
                return; // more than 2^64 elements: no such box can be read
            dims[n] = d;
            index[n++] = 0;
        }
    // Odometer over the outer dims longer than 1.
    std::int64_t srcOff = 0, dstOff = 0;
    while (true) {
        run(static_cast<std::uint64_t>(srcOff), static_cast<std::uint64_t>(dstOff), count);
        std::size_t k = n;
        while (true) {
            if (k == 0)
                return;
            --k;
            const std::size_t d = dims[k];
            if (++index[k] < shape[d]) {
                srcOff += srcStrides[d];
                dstOff += dstStrides[d];
                break;
            }
            srcOff -= srcStrides[d] * (shape[d] - 1);
            dstOff -= dstStrides[d] * (shape[d] - 1);
            index[k] = 0;
        }
    }
}

} // namespace detail

/// Calls `run(srcElem, dstElem, count)` for every maximal run of elements of a box of `shape` that is
/// contiguous both in the source (element strides `srcStrides`) and in the destination (`dstStrides`),
/// in row-major order. Trailing dims that are contiguous on both sides are merged into one run, so a
/// contiguous box gives a single call and a row-sharded box one call per row. A 0-dim box gives one run of
/// one element; a box with a zero-size dim gives none. Offsets are in elements from the box's first element.
/// Allocates nothing.
template <typename Run>
void forEachRun(const Shape& shape, const Shape& srcStrides, const Shape& dstStrides, Run&& run)
{
    detail::forEachRunOf(shape.data(), srcStrides.data(), dstStrides.data(), shape.size(), run);
}

/// Copies a strided box of `elementSize`-byte elements from `src` into `dst` (both pointing at the box's
/// first element) by memcpy of the innermost contiguous runs — never element by element unless the
/// source itself is transposed. Allocates nothing.
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
