// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// ggml's first 4- and 5-bit block types, 32 values to a block: Q4_0 and Q5_0 (one fp16 scale d, value = d·(q − 8)
// or d·(q − 16)) and Q4_1 and Q5_1 (a scale d and a minimum m, value = d·q + m). Each quantizer gives exactly the
// bytes of ggml's quantize_row_*_ref and each dequantizer exactly the floats of its dequantize_row_*
// (tst_gguf_kernels compares them with libggml-base). The table of types (gguf_types.h) points to them.
//
// In every block, code j of the first 16 is the low nibble of qs[j] and code j of the last 16 its high nibble; the
// 5-bit types keep each code's fifth bit in qh, a little-endian 32-bit mask with bit j for value j.

#include <cstdint>

namespace tessera {

struct BlockQ4_0 {
    std::uint16_t d; ///< fp16
    std::uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18, "ggml's block_q4_0 is 18 bytes, unpadded");

struct BlockQ4_1 {
    std::uint16_t d; ///< fp16
    std::uint16_t m; ///< fp16
    std::uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20, "ggml's block_q4_1 is 20 bytes, unpadded");

struct BlockQ5_0 {
    std::uint16_t d; ///< fp16
    std::uint8_t qh[4];
    std::uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22, "ggml's block_q5_0 is 22 bytes, unpadded");

struct BlockQ5_1 {
    std::uint16_t d; ///< fp16
    std::uint16_t m; ///< fp16
    std::uint8_t qh[4];
    std::uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24, "ggml's block_q5_1 is 24 bytes, unpadded");

/// Values in each block of these four types.
inline constexpr std::uint64_t kLegacyBlockValues = 32;

/// Q4_0: the value of largest magnitude x_max gives d = x_max / −8, codes q = min(15, trunc(x/d + 8.5)).
void quantizeQ4_0Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
void dequantizeQ4_0Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

/// Q4_1: m = the block's minimum, d = (max − min) / 15, codes q = min(15, trunc((x − m)/d + 0.5)).
void quantizeQ4_1Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
void dequantizeQ4_1Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

/// Q5_0: d = x_max / −16, codes q = min(31, trunc(x/d + 16.5)).
void quantizeQ5_0Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
void dequantizeQ5_0Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

/// Q5_1: m = the minimum, d = (max − min) / 31, codes q = trunc((x − m)/d + 0.5).
void quantizeQ5_1Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
void dequantizeQ5_1Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

} // namespace tessera
