// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The size of ggml's Q8_0 block, known to the model (a piece's byte offsets) and to the GGUF code alike.

#include <cstdint>

namespace tessera {

inline constexpr std::uint64_t kQ8_0BlockElements = 32; ///< values per block
inline constexpr std::uint64_t kQ8_0BlockBytes = 34;    ///< an fp16 scale and 32 int8

} // namespace tessera
