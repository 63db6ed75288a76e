// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// llama.cpp's k-quants: super-blocks of 256 values in sub-blocks of 16 or 32, each sub-block with its own scale
// (and minimum, for Q2_K, Q4_K, Q5_K) quantized against one or two fp16 super-block scales. Each quantizer gives
// exactly the bytes of ggml's quantize_row_*_ref (no importance matrix) and each dequantizer exactly the floats of
// its dequantize_row_* (tst_gguf_kernels compares them with libggml-base). The table of types (gguf_types.h)
// points to them.

#include <cstdint>

namespace tessera {

/// Values in a k-quant super-block (ggml's QK_K).
inline constexpr std::uint64_t kSuperBlockValues = 256;

/// 16 sub-blocks of 16: value = d·sc·q − dmin·m, q of 2 bits; scales[j] holds sc (low nibble) and m (high).
struct BlockQ2_K {
    std::uint8_t scales[16];
    std::uint8_t qs[64];
    std::uint16_t d;    ///< fp16
    std::uint16_t dmin; ///< fp16
};
static_assert(sizeof(BlockQ2_K) == 84, "ggml's block_q2_K is 84 bytes, unpadded");

/// 16 sub-blocks of 16: value = d·(sc − 32)·(q − 4), q of 3 bits (2 in qs, the third in hmask), sc of 6 bits.
struct BlockQ3_K {
    std::uint8_t hmask[32];
    std::uint8_t qs[64];
    std::uint8_t scales[12];
    std::uint16_t d; ///< fp16
};
static_assert(sizeof(BlockQ3_K) == 110, "ggml's block_q3_K is 110 bytes, unpadded");

/// 8 sub-blocks of 32: value = d·sc·q − dmin·m, q of 4 bits, sc and m of 6 bits packed in scales.
struct BlockQ4_K {
    std::uint16_t d;    ///< fp16
    std::uint16_t dmin; ///< fp16
    std::uint8_t scales[12];
    std::uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144, "ggml's block_q4_K is 144 bytes, unpadded");

/// As Q4_K with q of 5 bits, the fifth in qh.
struct BlockQ5_K {
    std::uint16_t d;    ///< fp16
    std::uint16_t dmin; ///< fp16
    std::uint8_t scales[12];
    std::uint8_t qh[32];
    std::uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176, "ggml's block_q5_K is 176 bytes, unpadded");

/// 16 sub-blocks of 16: value = d·sc·(q − 32), q of 6 bits (4 in ql, 2 in qh), sc a signed byte.
struct BlockQ6_K {
    std::uint8_t ql[128];
    std::uint8_t qh[64];
    std::int8_t scales[16];
    std::uint16_t d; ///< fp16
};
static_assert(sizeof(BlockQ6_K) == 210, "ggml's block_q6_K is 210 bytes, unpadded");

void quantizeQ2_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
void dequantizeQ2_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

void quantizeQ3_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
void dequantizeQ3_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

void quantizeQ4_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
void dequantizeQ4_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

void quantizeQ5_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
void dequantizeQ5_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

void quantizeQ6_KBlocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
void dequantizeQ6_KBlocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

} // namespace tessera
