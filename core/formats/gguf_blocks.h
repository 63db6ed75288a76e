// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What the block kernels (gguf_quant, gguf_quant_legacy, gguf_quant_k) share: a block copied between a byte buffer,
// which holds blocks at any alignment, and a struct on the stack, and ggml's fp16 scales.

#include "model/convert.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tessera {

/// Block `index` of the blocks at `src`, copied out (a tensor's blocks are not aligned to their fields).
template <typename Block>
Block loadBlock(const std::uint8_t* src, std::uint64_t index)
{
    Block block;
    std::memcpy(&block, src + index * sizeof(Block), sizeof(Block));
    return block;
}

template <typename Block>
void storeBlock(const Block& block, std::uint8_t* dst, std::uint64_t index)
{
    std::memcpy(dst + index * sizeof(Block), &block, sizeof(Block));
}

/// ggml's GGML_FP32_TO_FP16 of `n` floats: round to nearest, ties to even, as convertElements rounds. A NaN
/// becomes 0x7E00 with its sign, as ggml's scalar conversion writes it; the converter would keep the top of the
/// payload (as vcvtps2ph does), and the scale's bytes would differ.
inline void toGgmlHalves(const float* values, std::uint16_t* halves, std::size_t n)
{
    (void)convertElements(values, DType::Float32, halves, DType::Float16, n);
    for (std::size_t i = 0; i < n; ++i)
        if ((halves[i] & 0x7FFFu) > 0x7C00u)
            halves[i] = static_cast<std::uint16_t>((halves[i] & 0x8000u) | 0x7E00u);
}

inline std::uint16_t toGgmlHalf(float value)
{
    std::uint16_t half = 0;
    toGgmlHalves(&value, &half, 1);
    return half;
}

/// ggml's GGML_FP16_TO_FP32: exact for every half; NaNs stay NaNs (their payload bits are no value).
inline void fromGgmlHalves(const std::uint16_t* halves, float* values, std::size_t n)
{
    (void)convertElements(halves, DType::Float16, values, DType::Float32, n);
}

inline float fromGgmlHalf(std::uint16_t half)
{
    float value = 0;
    fromGgmlHalves(&half, &value, 1);
    return value;
}

} // namespace tessera
