// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/byte_size.h"

#include <array>
#include <cctype>
#include <cstdio>
#include <limits>
#include <optional>

namespace tessera {

namespace {

// 128-bit intermediate so that "18446744073709551615" or "16777216TiB" are judged exactly, without floats.
__extension__ typedef unsigned __int128 Wide;

struct Unit {
    std::string_view name;
    std::uint64_t factor;
};

constexpr std::array<Unit, 12> kUnits { {
    { "", 1 },
    { "b", 1 },
    { "kb", 1000ULL },
    { "mb", 1000ULL * 1000 },
    { "gb", 1000ULL * 1000 * 1000 },
    { "tb", 1000ULL * 1000 * 1000 * 1000 },
    { "pb", 1000ULL * 1000 * 1000 * 1000 * 1000 },
    { "kib", 1ULL << 10 },
    { "mib", 1ULL << 20 },
    { "gib", 1ULL << 30 },
    { "tib", 1ULL << 40 },
    { "pib", 1ULL << 50 },
} };

std::optional<std::uint64_t> unitFactor(std::string_view unit)
{
    std::string lower;
    for (const char c : unit)
        lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& u : kUnits)
        if (u.name == lower)
            return u.factor;
    return std::nullopt;
}

bool isSpace(char c) { return c == ' ' || c == '\t'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view trimmed(std::string_view text)
{
    while (!text.empty() && isSpace(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && isSpace(text.back()))
        text.remove_suffix(1);
    return text;
}

Error sizeError(std::string_view text, const std::string& why)
{
    return makeError(
        "invalid size \"" + std::string(text) + "\": " + why + " (examples: 5GB, 500MB, 2GiB, 1.5GB, 123 for bytes)");
}

} // namespace

Result<std::uint64_t> parseByteSize(std::string_view text)
{
    const std::string_view s = trimmed(text);
    std::size_t i = 0;
    constexpr Wide kMax = std::numeric_limits<std::uint64_t>::max();

    Wide whole = 0;
    std::size_t digits = 0;
    for (; i < s.size() && isDigit(s[i]); ++i, ++digits) {
        whole = whole * 10 + static_cast<unsigned>(s[i] - '0');
        if (whole > kMax)
            return sizeError(text, "the number is too large");
    }
    // Fraction digits beyond 18 cannot change a whole byte count of a value below 2^64 by much; keep 18.
    Wide fraction = 0, scale = 1;
    if (i < s.size() && s[i] == '.') {
        for (++i; i < s.size() && isDigit(s[i]); ++i, ++digits) {
            if (scale < 1000000000000000000ULL) {
                fraction = fraction * 10 + static_cast<unsigned>(s[i] - '0');
                scale *= 10;
            }
        }
    }
    if (digits == 0)
        return sizeError(text, s.empty() ? "it is empty" : "it must start with a number");

    while (i < s.size() && isSpace(s[i]))
        ++i;
    const std::string_view unit = s.substr(i);
    const auto factor = unitFactor(unit);
    if (!factor) {
        const bool bare = unit.size() == 1 && std::string_view("kKmMgGtTpP").find(unit[0]) != std::string_view::npos;
        return sizeError(text,
            bare ? "write the unit in full, e.g. \"" + std::string(unit) + "B\" (powers of 1000) or \""
                    + std::string(unit) + "iB\" (powers of 1024)"
                 : "unknown unit \"" + std::string(unit) + "\"");
    }
    const Wide total = whole * *factor + fraction * *factor / scale;
    if (total > kMax)
        return sizeError(text, "it is more than 2^64 bytes");
    return static_cast<std::uint64_t>(total);
}

std::string formatBytes(std::uint64_t bytes)
{
    if (bytes < 1000)
        return std::to_string(bytes) + " B";
    static constexpr std::array<const char*, 6> kNames { "KB", "MB", "GB", "TB", "PB", "EB" };
    double value = static_cast<double>(bytes) / 1000.0;
    std::size_t unit = 0;
    while (value >= 999.5 && unit + 1 < kNames.size()) { // 999.5 KB would print as "1000 KB"
        value /= 1000.0;
        ++unit;
    }
    const int decimals = value < 9.995 ? 2 : value < 99.95 ? 1 : 0;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.*f %s", decimals, value, kNames[unit]);
    return buffer;
}

} // namespace tessera
