// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

/// A whole number as a person types it: decimal digits only, no sign, spaces, exponent or hex, at most
/// `max`. Anything else is nullopt, so "1e3", "4294967297" for a 32-bit count, "-1", " 8" or "" are refused rather
/// than read as 1, wrapped or clamped.
std::optional<std::uint64_t> parseWholeNumber(std::string_view text, std::uint64_t max = UINT64_MAX);

/// A finite decimal number as a person types it: an optional '-', digits with an optional fraction, and an
/// optional exponent ("0.5", "1e-5", "2.5E3"). No spaces, hex, "inf" or "nan"; nullopt for anything else.
std::optional<double> parseDecimalNumber(std::string_view text);

} // namespace tessera
