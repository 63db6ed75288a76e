// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/number_text.h"

#include <cmath>
#include <cstdlib>
#include <string>

namespace tessera {

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// Index past the digits that start at `i`.
std::size_t skipDigits(std::string_view s, std::size_t i)
{
    while (i < s.size() && isDigit(s[i]))
        ++i;
    return i;
}

} // namespace

std::optional<std::uint64_t> parseWholeNumber(std::string_view text, std::uint64_t max)
{
    if (text.empty() || skipDigits(text, 0) != text.size())
        return std::nullopt;
    std::uint64_t n = 0;
    for (const char c : text) {
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (n > (max - digit) / 10)
            return std::nullopt;
        n = n * 10 + digit;
    }
    return n;
}

std::optional<double> parseDecimalNumber(std::string_view text)
{
    // The grammar is checked here; strtod only converts what it allows (it would also take hex, "inf" and spaces).
    std::size_t i = text.size() > 0 && text[0] == '-' ? 1 : 0;
    const std::size_t whole = skipDigits(text, i);
    std::size_t end = whole;
    std::size_t digits = whole - i;
    if (end < text.size() && text[end] == '.') {
        const std::size_t fraction = skipDigits(text, end + 1);
        digits += fraction - end - 1;
        end = fraction;
    }
    if (digits == 0)
        return std::nullopt;
    if (end < text.size() && (text[end] == 'e' || text[end] == 'E')) {
        std::size_t e = end + 1;
        if (e < text.size() && (text[e] == '-' || text[e] == '+'))
            ++e;
        const std::size_t exponent = skipDigits(text, e);
        if (exponent == e)
            return std::nullopt;
        end = exponent;
    }
    if (end != text.size())
        return std::nullopt;
    const std::string copy(text);
    const double value = std::strtod(copy.c_str(), nullptr);
    if (!std::isfinite(value))
        return std::nullopt;
    return value;
}

} // namespace tessera
