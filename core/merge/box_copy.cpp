// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/box_copy.h"

#include <algorithm>
#include <cstring>

namespace tessera {

namespace {

/// `n` elements of `T` from `src` every `ss` elements to `dst` every `ds` elements.
template <typename T>
void copyLine(const std::uint8_t* src, std::int64_t ss, std::uint8_t* dst, std::int64_t ds, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i)
        std::memcpy(dst + i * ds * static_cast<std::int64_t>(sizeof(T)), src + i * ss * static_cast<std::int64_t>(sizeof(T)),
                    sizeof(T));
}

void copyLineOf(std::size_t elementSize, const std::uint8_t* src, std::int64_t ss, std::uint8_t* dst, std::int64_t ds,
                std::int64_t n)
{
    switch (elementSize) {
    case 1:
        return copyLine<std::uint8_t>(src, ss, dst, ds, n);
    case 2:
        return copyLine<std::uint16_t>(src, ss, dst, ds, n);
    case 4:
        return copyLine<std::uint32_t>(src, ss, dst, ds, n);
    case 8:
        return copyLine<std::uint64_t>(src, ss, dst, ds, n);
    default:
        for (std::int64_t i = 0; i < n; ++i)
            std::memcpy(dst + static_cast<std::uint64_t>(i * ds) * elementSize,
                        src + static_cast<std::uint64_t>(i * ss) * elementSize, elementSize);
    }
}

} // namespace

void copyBox(const std::uint8_t* src, const Shape& srcStrides, const Shape& shape, std::size_t elementSize,
             std::uint8_t* dst, const Shape& dstStrides)
{
    // The innermost dim longer than 1 (dims of size 1 after it do not move anything).
    std::size_t line = shape.size();
    while (line > 0 && shape[line - 1] == 1)
        --line;
    if (line == 0 || (srcStrides[line - 1] == 1 && dstStrides[line - 1] == 1)) {
        forEachRun(shape, srcStrides, dstStrides, [&](std::uint64_t s, std::uint64_t d, std::uint64_t n) {
            std::memcpy(dst + d * elementSize, src + s * elementSize, n * elementSize);
        });
        return;
    }
    // A transposed box (its innermost dim strided on a side: GPT-OSS's experts): tight loops over blocks of the
    // innermost lines instead of one call per element. Runs of the outer dims are lines at consecutive element
    // offsets. The lines are cut into blocks and the blocks are the outer loop, so the few source (or destination)
    // rows a block strides across stay in the cache while every line takes its piece of them: a tiled transpose.
    --line;
    for (auto s : shape)
        if (s <= 0)
            return;
    const std::int64_t n = shape[line], ss = srcStrides[line], ds = dstStrides[line];
    constexpr std::int64_t kBlock = 64;
    for (std::int64_t first = 0; first < n; first += kBlock) {
        const std::int64_t count = std::min(kBlock, n - first);
        const std::uint8_t* from = src + first * ss * static_cast<std::int64_t>(elementSize);
        std::uint8_t* to = dst + first * ds * static_cast<std::int64_t>(elementSize);
        detail::forEachRunOf(shape.data(), srcStrides.data(), dstStrides.data(), line,
                             [&](std::uint64_t s, std::uint64_t d, std::uint64_t lines) {
            for (std::uint64_t c = 0; c < lines; ++c)
                copyLineOf(elementSize, from + (s + c) * elementSize, ss, to + (d + c) * elementSize, ds, count);
        });
    }
}

Shape globalStrides(const Shape& globalShape)
{
    Shape strides(globalShape.size(), 1);
    for (std::size_t d = globalShape.size(); d-- > 1;)
        strides[d - 1] = strides[d] * globalShape[d];
    return strides;
}

std::uint64_t elementOffset(const Shape& offsets, const Shape& strides)
{
    std::int64_t off = 0;
    for (std::size_t d = 0; d < offsets.size() && d < strides.size(); ++d)
        off += offsets[d] * strides[d];
    return static_cast<std::uint64_t>(off);
}

bool boxIsContiguousInTensor(const Shape& offsets, const Shape& shape, const Shape& globalShape)
{
    // Skip leading dims of size 1; the first larger dim may be partial, every later one must be whole.
    std::size_t d = 0;
    while (d < shape.size() && shape[d] == 1)
        ++d;
    for (std::size_t k = d + 1; k < shape.size(); ++k)
        if (shape[k] != globalShape[k] || offsets[k] != 0)
            return false;
    return true;
}

bool isContiguous(const Shape& shape, const Shape& strides)
{
    std::int64_t expected = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
        if (shape[d] != 1 && strides[d] != expected)
            return false;
        expected *= shape[d];
    }
    return true;
}

std::uint64_t boxSpanBytes(const Shape& shape, const Shape& strides, std::size_t elementSize)
{
    std::int64_t last = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] <= 0)
            return 0;
        last += (shape[d] - 1) * (strides[d] < 0 ? -strides[d] : strides[d]);
    }
    return static_cast<std::uint64_t>(last + 1) * elementSize;
}

} // namespace tessera
