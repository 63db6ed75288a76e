// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// ggml's Q8_0 blocks: 32 values as one fp16 scale d and 32 int8 q, value = d·q.

#include "model/dtype.h"
#include "model/quant_blocks.h"
#include "result.h"

#include <cstdint>

namespace tessera {

/// Quantizes `count` floats (a multiple of 32) into Q8_0 blocks at `dst` exactly as ggml's
/// quantize_row_q8_0_ref: per block amax = max |x|, d = amax / 127 (in float), q = roundf(x · (1/d)) (half away
/// from zero; 0 when d is 0), d stored as fp16 rounded to nearest even. Runs on up to `threads` threads.
Status quantizeQ8_0(const float* src, std::uint64_t count, std::uint8_t* dst, unsigned threads);

/// quantizeQ8_0() of `count` elements of a floating `dtype` (float16, bfloat16, float32, float64), converted to
/// float32 a slab at a time on each thread, so no float32 copy of the whole tensor is ever made.
Status quantizeQ8_0From(const void* src, DType dtype, std::uint64_t count, std::uint8_t* dst, unsigned threads);

/// Expands Q8_0 blocks back to floats (d in fp32 times q), as ggml's dequantize_row_q8_0.
void dequantizeQ8_0(const std::uint8_t* src, std::uint64_t count, float* dst);

} // namespace tessera
