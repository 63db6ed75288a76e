// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Regular expressions from the user or from rules files, compiled without exceptions and without the deep
// recursion libstdc++'s std::regex compiler and matcher use per nesting level and per term.

#include "result.h"

#include <regex>
#include <string>

namespace tessera {

/// Longest pattern and deepest group nesting accepted; real ones are a few dozen characters and levels.
constexpr std::size_t kMaxRegexLength = 4096;
constexpr int kMaxRegexNesting = 32;

/// Compiles `pattern` (ECMAScript). The error says what is wrong with it; `what` names it ("--ignore_missing_params").
Result<std::regex> compileUserRegex(const std::string& pattern, const std::string& what,
                                    std::regex::flag_type flags = std::regex::ECMAScript);

} // namespace tessera
