// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/option_values.h"

#include "io/number_text.h"

#include <cmath>
#include <cstdio>

namespace tessera {

Result<std::uint64_t> wholeNumberValue(const std::string& flag, const std::string& text, std::uint64_t min,
                                       std::uint64_t max)
{
    const auto n = parseWholeNumber(text, max);
    if (!n || *n < min)
        return makeError("--" + flag + " must be a whole number from " + std::to_string(min) + " to "
                         + std::to_string(max) + " (got '" + text + "')");
    return *n;
}

Result<double> decimalValue(const std::string& flag, const std::string& text, double min, double max, bool aboveMin)
{
    const auto v = parseDecimalNumber(text);
    if (v && (aboveMin ? *v > min : *v >= min) && *v <= max)
        return *v;
    auto shown = [](double x) {
        char buffer[32];
        std::snprintf(buffer, sizeof buffer, "%g", x);
        return std::string(buffer);
    };
    std::string range = aboveMin ? "above " + shown(min) : (std::isinf(max) ? "of " + shown(min) + " or more"
                                                                            : "from " + shown(min));
    if (!std::isinf(max))
        range += (aboveMin ? " and at most " : " to ") + shown(max);
    return makeError("--" + flag + " must be a number " + range + " (got '" + text + "')");
}

Result<unsigned> threadsValue(const std::optional<std::string>& text)
{
    if (!text)
        return 0u;
    auto n = wholeNumberValue("threads", *text, 1, kMaxThreads);
    TESSERA_TRY(n);
    return static_cast<unsigned>(*n);
}

Result<double> toleranceValue(const std::string& flag, const std::optional<std::string>& text)
{
    return decimalValue(flag, text.value_or("0"), 0, HUGE_VAL);
}

} // namespace tessera
