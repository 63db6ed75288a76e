// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "result.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

/// Parses a size as users and Hugging Face write it: "123" (bytes), "100KB", "500MB", "5GB", "1TB" (powers of
/// 1000, as transformers means them), "1KiB", "2GiB" (powers of 1024), "1.5GB". Units are case-insensitive and may
/// follow the number after spaces; "B" alone means bytes. A fractional result is rounded down to whole bytes.
/// Ambiguous spellings like "5G" are rejected with a hint rather than guessed.
Result<std::uint64_t> parseByteSize(std::string_view text);

/// A byte count for humans, in decimal units with three significant digits: "512 B", "1.23 GB", "45.6 MB".
std::string formatBytes(std::uint64_t bytes);

} // namespace tessera
