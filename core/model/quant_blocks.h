// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The sizes of the quantized blocks Tessera reads, known to the model (a piece's byte offsets) and to the code
// that encodes and decodes them alike: ggml's Q8_0 and OCP's MXFP4.

#include <cstdint>

namespace tessera {

inline constexpr std::uint64_t kQ8_0BlockElements = 32; ///< values per block
inline constexpr std::uint64_t kQ8_0BlockBytes = 34;    ///< an fp16 scale and 32 int8

inline constexpr std::uint64_t kMxfp4BlockElements = 32; ///< values sharing one scale
inline constexpr std::uint64_t kMxfp4BlockBytes = 16;    ///< 32 4-bit codes (the scale byte is stored apart)

} // namespace tessera
