// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Quantizing to and from ggml's block types: the drivers that run a type's kernel (the table of types, gguf_types.h,
// points to one pair a type) over a whole tensor on several threads, and Q8_0's kernels; the other legacy types'
// are in gguf_quant_legacy.h, the k-quants' in gguf_quant_k.h.

#include "formats/gguf_types.h"
#include "model/dtype.h"
#include "result.h"

#include <cstdint>

namespace tessera {

/// Quantizes `count` floats (whole blocks of `type`, a quantized type) into `dst`, with the type's kernel, on up to
/// `threads` threads.
Status quantizeGgml(GgmlType type, const float* src, std::uint64_t count, std::uint8_t* dst, unsigned threads);

/// quantizeGgml() of `count` elements of a floating `dtype` (float16, bfloat16, float32, float64), converted to
/// float32 a slab at a time on each thread, so no float32 copy of the whole tensor is ever made.
Status quantizeGgmlFrom(GgmlType type, const void* src, DType dtype, std::uint64_t count, std::uint8_t* dst,
                        unsigned threads);

/// The float32 staging each thread of quantizeGgmlFrom() holds for `type` (a slab of whole blocks), for memory
/// estimates.
std::uint64_t quantizeSlabBytes(GgmlType type);

/// Expands `count` values (whole blocks of `type`, a quantized type) back to floats, with the type's kernel.
Status dequantizeGgml(GgmlType type, const std::uint8_t* src, std::uint64_t count, float* dst);

// --- Kernels (one thread, whole blocks), reached through the table --------------------------------------------
// Each type's block is a struct as ggml declares it; the table's geometry is its size, so it is stated only here.

/// ggml's block_q8_0: 32 values as one fp16 scale d and 32 int8 q, value = d·q.
struct BlockQ8_0 {
    std::uint16_t d;
    std::int8_t q[32];
};
static_assert(sizeof(BlockQ8_0) == 34, "ggml's block_q8_0 is 34 bytes, unpadded");

/// Q8_0 blocks, exactly as ggml's
/// quantize_row_q8_0_ref: per block amax = max |x|, d = amax / 127 (in float), q = roundf(x · (1/d)) (half away
/// from zero; 0 when d is 0), d stored as fp16 rounded to nearest even.
void quantizeQ8_0Blocks(const float* src, std::uint64_t blocks, std::uint8_t* dst);
/// Q8_0 blocks back to floats (d in fp32 times q), as ggml's dequantize_row_q8_0.
void dequantizeQ8_0Blocks(const std::uint8_t* src, std::uint64_t blocks, float* dst);

} // namespace tessera
