// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <optional>
#include <string>

namespace tessera {

/// The whole content of a small text file (a config, an index, a tracker); nullopt when it cannot be read.
/// Callers say what the file is in their own error message. Never used for tensor data.
std::optional<std::string> readTextFile(const std::string& path);

} // namespace tessera
