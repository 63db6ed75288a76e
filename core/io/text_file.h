// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "result.h"

#include <cstdint>
#include <string>

namespace tessera {

/// Configs, indexes and rules files are kilobytes to a few megabytes; anything larger is not one of them.
constexpr std::uint64_t kMaxTextFileBytes = 64ull << 20;

/// The whole content of a small text file (a config, an index, a tracker). Refuses what is not a regular file
/// (a FIFO would block, /dev/zero never ends) and files over `maxBytes`; the error names the path and why.
/// Never used for tensor data.
Result<std::string> readTextFile(const std::string& path, std::uint64_t maxBytes = kMaxTextFileBytes);

class RegularFile;
/// The same for a file already open (e.g. by openBeneath()); `path` names it in errors.
Result<std::string> readTextFile(const RegularFile& file, const std::string& path,
                                 std::uint64_t maxBytes = kMaxTextFileBytes);

} // namespace tessera
