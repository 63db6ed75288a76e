// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// OCP's MXFP4, as transformers stores GPT-OSS's experts: 4-bit E2M1 codes, 32 to a block, each block scaled by a
// power of two held in one E8M0 byte apart from the codes.

#include "model/checkpoint.h"

#include <cstdint>

namespace tessera {

/// MXFP4's blocks as its pieces carry them: 32 values in 16 bytes of codes (each block's scale byte lies apart).
inline constexpr PieceBlocks kMxfp4Blocks { "MXFP4", 0, 32, 16 };

/// Expands `blocks` MXFP4 blocks (16 code bytes each at `codes`, one scale byte each at `scales`) into 32 floats
/// each at `dst`, as transformers' convert_moe_packed_tensors does: code c (low nibble first) is E2M1's value
/// (0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6) times 2^(scale − 127) computed in float32, where scale 255 stands for an
/// infinite factor (a zero code then gives NaN).
void dequantizeMxfp4(const std::uint8_t* codes, const std::uint8_t* scales, std::uint64_t blocks, float* dst);

/// Replaces each pair `<name>_blocks` (uint8 [E, R, G, 16]) and `<name>_scales` (uint8 [E, R, G]) among a Hugging
/// Face folder's tensors by the one tensor `<name>` transformers loads from them: bfloat16 [E, G·32, R] (the
/// dequantized [E, R, G·32], transposed in its last two dims), one MXFP4 piece over the two stored tensors. A uint8
/// pair that is not such a tensor (shapes that do not fit together, a tensor `<name>` beside it) is a problem of
/// `info`, never raw codes to copy. Returns how many tensors were joined.
std::size_t joinMxfp4Pairs(CheckpointInfo& info);

} // namespace tessera
