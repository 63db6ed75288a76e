// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_quant_legacy.h"

#include "formats/gguf_blocks.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

// Byte-identical to ggml only when every float operation rounds as ggml's do, one at a time: this file is compiled
// with -ffp-contract=off (core/CMakeLists.txt), and each expression keeps ggml's order.

namespace tessera {

namespace {

constexpr std::uint64_t kHalfBlock = kLegacyBlockValues / 2;
/// Blocks whose fp16 scales are converted in one call, the rest of their bytes staged on the stack meanwhile.
constexpr std::uint64_t kChunkBlocks = 128;

/// What ggml's cast of a float to an 8-bit integer gives on x86-64, which its quantizers rely on: the low byte of
/// the truncating 32-bit conversion (cvttss2si, cvttps2dq). That conversion gives 0x80000000, low byte 0, for NaN,
/// ±inf and anything beyond ±2^31, which a block of subnormals reaches when 1/d overflows. Defined for every input,
/// unlike the cast. Written as a select, not a branch, so the loops over a block still vectorise.
inline std::uint32_t truncatedLowByte(float v)
{
    const float inRange = std::fabs(v) < 2147483648.0f ? v : 0.0f;
    return static_cast<std::uint32_t>(static_cast<std::int32_t>(inRange)) & 0xFFu;
}

/// ggml's `(uint8_t)MIN(top, (int8_t)v)`: the truncated byte read as signed, then capped.
inline std::uint32_t cappedCode(float v, int top)
{
    const std::uint32_t byte = truncatedLowByte(v);
    const int code = byte >= 128u ? static_cast<int>(byte) - 256 : static_cast<int>(byte);
    return static_cast<std::uint32_t>(std::min(code, top)) & 0xFFu;
}

/// The value of largest magnitude, with its sign (the first of equals): the _0 types scale it to the code 0.
inline float signedAbsMax(const float* x)
{
    float amax = 0.0f;
    float max = 0.0f;
    for (std::uint64_t j = 0; j < kLegacyBlockValues; ++j)
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    return max;
}

struct Range {
    float min = FLT_MAX;
    float max = -FLT_MAX;
};

inline Range rangeOf(const float* x)
{
    Range r;
    for (std::uint64_t j = 0; j < kLegacyBlockValues; ++j) {
        if (x[j] < r.min)
            r.min = x[j];
        if (x[j] > r.max)
            r.max = x[j];
    }
    return r;
}

inline float inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

/// The _0 types' codes, around the code `zero` (8 or 16) that stands for 0: d = x_max / −zero and code
/// min(2·zero − 1, trunc(x/d + zero + 0.5)). Returns d.
inline float centredCodes(const float* x, int zero, std::uint32_t (&codes)[kLegacyBlockValues])
{
    const float d = signedAbsMax(x) / static_cast<float>(-zero);
    const float id = inverse(d);
    const float offset = static_cast<float>(zero) + 0.5f;
    for (std::uint64_t j = 0; j < kLegacyBlockValues; ++j)
        codes[j] = cappedCode(x[j] * id + offset, 2 * zero - 1);
    return d;
}

/// The _1 types' codes, from the block's minimum up: d = (max − min) / top and code trunc((x − min)/d + 0.5),
/// capped at top by Q4_1 (ggml's MIN) and not by Q5_1 (a plain cast to uint8_t). Returns d; `min` is the minimum.
inline float offsetCodes(const float* x, int top, bool capped, std::uint32_t (&codes)[kLegacyBlockValues], float& min)
{
    const Range r = rangeOf(x);
    const float d = (r.max - r.min) / static_cast<float>(top);
    const float id = inverse(d);
    for (std::uint64_t j = 0; j < kLegacyBlockValues; ++j) {
        const float v = (x[j] - r.min) * id + 0.5f;
        codes[j] = capped ? cappedCode(v, top) : truncatedLowByte(v);
    }
    min = r.min;
    return d;
}

/// Code j's fifth bit (0x10) into bit j of a 5-bit type's high mask, the mask stored little-endian.
inline void setHighBits(const std::uint32_t (&codes)[kLegacyBlockValues], std::uint8_t (&qh)[4])
{
    std::uint32_t mask = 0;
    for (std::uint64_t j = 0; j < kLegacyBlockValues; ++j)
        mask |= ((codes[j] & 0x10u) >> 4) << j;
    for (std::size_t k = 0; k < 4; ++k)
        qh[k] = static_cast<std::uint8_t>(mask >> (8 * k));
}

inline std::uint32_t highMask(const std::uint8_t (&qh)[4])
{
    return static_cast<std::uint32_t>(qh[0]) | static_cast<std::uint32_t>(qh[1]) << 8
           | static_cast<std::uint32_t>(qh[2]) << 16 | static_cast<std::uint32_t>(qh[3]) << 24;
}

/// Codes 0…15 in the low nibbles, codes 16…31 in the high ones. ggml's 4-bit types OR the whole low code in (it
/// fits a nibble, being capped at 15, unless the truncated byte was negative); its 5-bit types mask it first.
inline void packNibbles(const std::uint32_t (&codes)[kLegacyBlockValues], std::uint32_t lowMask,
                        std::uint8_t (&qs)[kHalfBlock])
{
    for (std::uint64_t j = 0; j < kHalfBlock; ++j)
        qs[j] = static_cast<std::uint8_t>((codes[j] & lowMask) | (codes[j + kHalfBlock] & 0x0Fu) << 4);
}

/// Has an fp16 minimum m beside its scale d.
template <typename Block>
constexpr bool kHasMin = false;
template <>
constexpr bool kHasMin<BlockQ4_1> = true;
template <>
constexpr bool kHasMin<BlockQ5_1> = true;

/// Runs `encode(x, block, scales)` (codes into the block, its d and, when it has one, m as floats into scales[0]
/// and scales[1]) over the blocks a chunk at a time, so the scales are rounded to fp16 together.
template <typename Block, typename Encode>
void quantizeInChunks(const float* src, std::uint64_t blocks, std::uint8_t* dst, Encode encode)
{
    constexpr std::uint64_t scalesPerBlock = kHasMin<Block> ? 2 : 1;
    Block chunk[kChunkBlocks];
    float scales[2 * kChunkBlocks];
    std::uint16_t halves[2 * kChunkBlocks];
    for (std::uint64_t first = 0; first < blocks; first += kChunkBlocks) {
        const std::uint64_t n = std::min(kChunkBlocks, blocks - first);
        for (std::uint64_t b = 0; b < n; ++b)
            encode(src + (first + b) * kLegacyBlockValues, chunk[b], scales + b * scalesPerBlock);
        toGgmlHalves(scales, halves, static_cast<std::size_t>(n * scalesPerBlock));
        for (std::uint64_t b = 0; b < n; ++b) {
            chunk[b].d = halves[b * scalesPerBlock];
            if constexpr (kHasMin<Block>)
                chunk[b].m = halves[b * scalesPerBlock + 1];
        }
        std::memcpy(dst + first * sizeof(Block), chunk, static_cast<std::size_t>(n * sizeof(Block)));
    }
}

/// Runs `decode(block, d, m, y)` over the blocks a chunk at a time, their fp16 scales widened together.
template <typename Block, typename Decode>
void dequantizeInChunks(const std::uint8_t* src, std::uint64_t blocks, float* dst, Decode decode)
{
    constexpr std::uint64_t scalesPerBlock = kHasMin<Block> ? 2 : 1;
    Block chunk[kChunkBlocks];
    std::uint16_t halves[2 * kChunkBlocks];
    float scales[2 * kChunkBlocks];
    for (std::uint64_t first = 0; first < blocks; first += kChunkBlocks) {
        const std::uint64_t n = std::min(kChunkBlocks, blocks - first);
        std::memcpy(chunk, src + first * sizeof(Block), static_cast<std::size_t>(n * sizeof(Block)));
        for (std::uint64_t b = 0; b < n; ++b) {
            halves[b * scalesPerBlock] = chunk[b].d;
            if constexpr (kHasMin<Block>)
                halves[b * scalesPerBlock + 1] = chunk[b].m;
        }
        fromGgmlHalves(halves, scales, static_cast<std::size_t>(n * scalesPerBlock));
        for (std::uint64_t b = 0; b < n; ++b) {
            const float m = kHasMin<Block> ? scales[b * scalesPerBlock + 1] : 0.0f;
            decode(chunk[b], scales[b * scalesPerBlock], m, dst + (first + b) * kLegacyBlockValues);
        }
    }
}

/// The 5-bit codes of a block, the fifth bit from qh.
template <typename Block>
inline void fiveBitCodes(const Block& block, int (&codes)[kLegacyBlockValues])
{
    const std::uint32_t qh = highMask(block.qh);
    for (std::uint64_t j = 0; j < kHalfBlock; ++j) {
        codes[j] = static_cast<int>((block.qs[j] & 0x0Fu) | (((qh >> j) << 4) & 0x10u));
        codes[j + kHalfBlock] = static_cast<int>((block.qs[j] >> 4) | ((qh >> (j + 12)) & 0x10u));
    }
}

} // namespace

void quantizeQ4_0Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    quantizeInChunks<BlockQ4_0>(src, blocks, dst, [](const float* x, BlockQ4_0& block, float* scales) {
        std::uint32_t codes[kLegacyBlockValues];
        scales[0] = centredCodes(x, 8, codes);
        packNibbles(codes, 0xFFu, block.qs);
    });
}

void dequantizeQ4_0Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    dequantizeInChunks<BlockQ4_0>(src, blocks, dst, [](const BlockQ4_0& block, float d, float, float* y) {
        for (std::uint64_t j = 0; j < kHalfBlock; ++j) {
            y[j] = static_cast<float>((block.qs[j] & 0x0F) - 8) * d;
            y[j + kHalfBlock] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
        }
    });
}

void quantizeQ4_1Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    quantizeInChunks<BlockQ4_1>(src, blocks, dst, [](const float* x, BlockQ4_1& block, float* scales) {
        std::uint32_t codes[kLegacyBlockValues];
        scales[0] = offsetCodes(x, 15, true, codes, scales[1]);
        packNibbles(codes, 0xFFu, block.qs);
    });
}

void dequantizeQ4_1Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    dequantizeInChunks<BlockQ4_1>(src, blocks, dst, [](const BlockQ4_1& block, float d, float m, float* y) {
        for (std::uint64_t j = 0; j < kHalfBlock; ++j) {
            y[j] = static_cast<float>(block.qs[j] & 0x0F) * d + m;
            y[j + kHalfBlock] = static_cast<float>(block.qs[j] >> 4) * d + m;
        }
    });
}

void quantizeQ5_0Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    quantizeInChunks<BlockQ5_0>(src, blocks, dst, [](const float* x, BlockQ5_0& block, float* scales) {
        std::uint32_t codes[kLegacyBlockValues];
        scales[0] = centredCodes(x, 16, codes);
        packNibbles(codes, 0x0Fu, block.qs);
        setHighBits(codes, block.qh);
    });
}

void dequantizeQ5_0Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    dequantizeInChunks<BlockQ5_0>(src, blocks, dst, [](const BlockQ5_0& block, float d, float, float* y) {
        int codes[kLegacyBlockValues];
        fiveBitCodes(block, codes);
        for (std::uint64_t j = 0; j < kLegacyBlockValues; ++j)
            y[j] = static_cast<float>(codes[j] - 16) * d;
    });
}

void quantizeQ5_1Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst)
{
    quantizeInChunks<BlockQ5_1>(src, blocks, dst, [](const float* x, BlockQ5_1& block, float* scales) {
        std::uint32_t codes[kLegacyBlockValues];
        scales[0] = offsetCodes(x, 31, false, codes, scales[1]);
        packNibbles(codes, 0x0Fu, block.qs);
        setHighBits(codes, block.qh);
    });
}

void dequantizeQ5_1Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst)
{
    dequantizeInChunks<BlockQ5_1>(src, blocks, dst, [](const BlockQ5_1& block, float d, float m, float* y) {
        int codes[kLegacyBlockValues];
        fiveBitCodes(block, codes);
        for (std::uint64_t j = 0; j < kLegacyBlockValues; ++j)
            y[j] = static_cast<float>(codes[j]) * d + m;
    });
}

} // namespace tessera
