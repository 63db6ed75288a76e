// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The core's one regular-expression engine: RE2, which matches in time linear in the text, with neither
// backtracking nor recursion per character. std::regex did both, so a 30,000-character tensor name overflowed the
// stack and a pattern such as ^(.|.)*Q$ ran for hours. Every pattern, the user's and the core's own, is compiled
// here. Text and patterns are bytes (RE2's Latin-1 mode), so `.` matches any byte of any name but a newline, as
// std::regex did.

#include "result.h"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace re2 {
class RE2;
}

namespace tessera {

/// Longest pattern accepted: real ones are a few dozen characters.
constexpr std::size_t kMaxRegexLength = 4096;

/// A compiled pattern; cheap to copy, safe to match from several threads at once.
class Regex {
public:
    /// Compiles a pattern from the user or a rules file (RE2 syntax). The error names `what`
    /// ("--ignore_missing_params") and says what is wrong: too long, a construct RE2 lacks (lookahead, lookbehind,
    /// backreferences) by name, or RE2's own complaint.
    static Result<Regex> compile(const std::string& pattern, const std::string& what);

    /// One of the core's own patterns, a literal in the code. It compiles by construction; one that does not is a
    /// bug, reported on stderr before the program aborts (the first test that uses it fails).
    static Regex fixed(const char* pattern);

    /// True when the pattern matches all of `text` (std::regex_match).
    bool fullMatch(std::string_view text) const;
    /// The same, and `groups` receives the text of each capturing group (empty for one that took no part).
    bool fullMatch(std::string_view text, std::vector<std::string>& groups) const;
    /// True when the pattern matches somewhere in `text` (std::regex_search).
    bool search(std::string_view text) const;
    /// The text of capturing group `group` (0: the whole match) in each match in `text`, left to right, the matches
    /// not overlapping (std::sregex_iterator).
    std::vector<std::string> findAll(std::string_view text, int group = 0) const;

    /// The number of capturing groups.
    int groupCount() const;

private:
    explicit Regex(std::shared_ptr<const re2::RE2> re) : m_re(std::move(re)) { }
    std::shared_ptr<const re2::RE2> m_re;
};

} // namespace tessera
