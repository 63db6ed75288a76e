// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The values of flags as typed, read one way for every request (and so for the command line and the workbench
// alike): the messages name the flag, the range and what was given.

#include "result.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

/// The most worker threads --threads takes: more than any machine Tessera runs on has cores, few enough that a
/// mistyped number cannot start a million threads.
inline constexpr unsigned kMaxThreads = 1024;

/// `text`, the value of --`flag`, as a whole number from `min` to `max`: decimal digits only (parseWholeNumber), so
/// "1e3", "-1", "" or a number past `max` are refused, not read as 1, wrapped or clamped.
Result<std::uint64_t> wholeNumberValue(const std::string& flag, const std::string& text, std::uint64_t min,
                                       std::uint64_t max);
/// `text`, the value of --`flag`, as a finite decimal number (parseDecimalNumber) of at least `min` (above it when
/// `aboveMin`) and at most `max`.
Result<double> decimalValue(const std::string& flag, const std::string& text, double min, double max,
                            bool aboveMin = false);
/// --threads: 0 when not given (one per core), else 1 to kMaxThreads.
Result<unsigned> threadsValue(const std::optional<std::string>& text);
/// --atol or --rtol: 0 when not given, else a finite number of 0 or more.
Result<double> toleranceValue(const std::string& flag, const std::optional<std::string>& text);

} // namespace tessera
