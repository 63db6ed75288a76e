// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/user_regex.h"

#include "io/printable.h"

namespace tessera {

Result<std::regex> compileUserRegex(const std::string& pattern, const std::string& what, std::regex::flag_type flags)
{
    const std::string shown = printableText(pattern.size() > 80 ? pattern.substr(0, 80) + "…" : pattern);
    if (pattern.size() > kMaxRegexLength)
        return makeError(what + " '" + shown + "' is " + std::to_string(pattern.size()) + " characters long; at most "
                         + std::to_string(kMaxRegexLength) + " are accepted");
    // Groups and classes counted the simple way (escapes skipped): enough to refuse 50,000 nested groups before
    // the recursive compiler sees them.
    int depth = 0, deepest = 0;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '\\') {
            ++i;
            continue;
        }
        if (pattern[i] == '(')
            deepest = std::max(deepest, ++depth);
        else if (pattern[i] == ')')
            --depth;
    }
    if (deepest > kMaxRegexNesting)
        return makeError(what + " '" + shown + "' nests groups " + std::to_string(deepest) + " levels deep; at most "
                         + std::to_string(kMaxRegexNesting) + " are accepted");
    try {
        return std::regex(pattern, flags);
    } catch (const std::regex_error& e) {
        return makeError(what + " '" + shown + "' is not a valid regular expression: " + e.what());
    } catch (const std::exception& e) {
        return makeError(what + " '" + shown + "' cannot be compiled: " + e.what());
    }
}

} // namespace tessera
