// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/regex.h"

#include "io/printable.h"

#include <re2/re2.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace tessera {

namespace {

RE2::Options bytewiseOptions()
{
    RE2::Options options;
    options.set_encoding(RE2::Options::EncodingLatin1); // bytes, so no name is invalid UTF-8 to it
    options.set_log_errors(false);                       // errors are returned, never printed
    return options;
}

re2::StringPiece piece(std::string_view text) { return re2::StringPiece(text.data(), text.size()); }

/// What a pattern written for ECMAScript or Perl most often uses that RE2 lacks: the construct, and what to write
/// instead.
struct LackedConstruct {
    std::string construct;
    std::string instead;
};

/// The first construct of `pattern` that RE2 lacks; nullopt when there is none. Escapes, \Q…\E and character
/// classes are skipped.
std::optional<LackedConstruct> constructRe2Lacks(const std::string& pattern)
{
    const std::string noLookaround = "match the names themselves instead (alternatives a|b, classes [^…])";
    const std::string noBackreference = "repeat the group's pattern instead";
    const std::size_t n = pattern.size();
    bool inClass = false;
    for (std::size_t i = 0; i < n; ++i) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < n) {
            const char next = pattern[i + 1];
            if (next == 'Q') {
                const auto end = pattern.find("\\E", i + 2);
                if (end == std::string::npos)
                    return std::nullopt;
                i = end + 1;
            } else if (!inClass && next >= '1' && next <= '9') {
                return LackedConstruct { std::string("a backreference (\\") + next + ")", noBackreference };
            } else if (!inClass && next == 'k' && i + 2 < n && pattern[i + 2] == '<') {
                return LackedConstruct { "a named backreference (\\k<…>)", noBackreference };
            } else {
                ++i;
            }
            continue;
        }
        if (inClass) {
            inClass = c != ']';
            continue;
        }
        if (c == '[') {
            inClass = true;
            // A ']' right after '[' or '[^' is a literal.
            if (i + 1 < n && pattern[i + 1] == '^')
                ++i;
            if (i + 1 < n && pattern[i + 1] == ']')
                ++i;
            continue;
        }
        const std::string_view rest = std::string_view(pattern).substr(i);
        if (rest.substr(0, 3) == "(?=")
            return LackedConstruct { "a lookahead (?=…)", noLookaround };
        if (rest.substr(0, 3) == "(?!")
            return LackedConstruct { "a negative lookahead (?!…)", noLookaround };
        if (rest.substr(0, 4) == "(?<=")
            return LackedConstruct { "a lookbehind (?<=…)", noLookaround };
        if (rest.substr(0, 4) == "(?<!")
            return LackedConstruct { "a negative lookbehind (?<!…)", noLookaround };
        if (rest.substr(0, 3) == "(?<")
            return LackedConstruct { "a named group (?<name>…)", "write it (?P<name>…)" };
    }
    return std::nullopt;
}

} // namespace

Result<Regex> Regex::compile(const std::string& pattern, const std::string& what)
{
    const std::string shown = printableText(pattern.size() > 80 ? pattern.substr(0, 80) + "…" : pattern);
    if (pattern.size() > kMaxRegexLength)
        return makeError(what + " '" + shown + "' is " + std::to_string(pattern.size()) + " characters long; at most "
                         + std::to_string(kMaxRegexLength) + " are accepted");
    auto re = std::make_shared<const re2::RE2>(piece(pattern), bytewiseOptions());
    if (re->ok())
        return Regex(std::move(re));
    if (const auto lacked = constructRe2Lacks(pattern))
        return makeError(what + " '" + shown + "' uses " + lacked->construct + ", which RE2 (Tessera's linear-time "
                         "regex engine) does not have: " + lacked->instead);
    return makeError(what + " '" + shown + "' is not a valid regular expression (RE2 syntax): "
                     + printableText(re->error()));
}

Regex Regex::fixed(const char* pattern)
{
    auto re = std::make_shared<const re2::RE2>(pattern, bytewiseOptions());
    if (!re->ok()) {
        std::fprintf(stderr, "tessera: internal error: the built-in pattern '%s' does not compile: %s\n", pattern,
                     re->error().c_str());
        std::abort();
    }
    return Regex(std::move(re));
}

bool Regex::fullMatch(std::string_view text) const
{
    return m_re->Match(piece(text), 0, text.size(), RE2::ANCHOR_BOTH, nullptr, 0);
}

bool Regex::fullMatch(std::string_view text, std::vector<std::string>& groups) const
{
    std::vector<re2::StringPiece> found(static_cast<std::size_t>(groupCount()) + 1);
    if (!m_re->Match(piece(text), 0, text.size(), RE2::ANCHOR_BOTH, found.data(), static_cast<int>(found.size())))
        return false;
    groups.clear();
    for (std::size_t i = 1; i < found.size(); ++i)
        groups.emplace_back(found[i].data() ? std::string(found[i].data(), found[i].size()) : std::string());
    return true;
}

bool Regex::search(std::string_view text) const
{
    return m_re->Match(piece(text), 0, text.size(), RE2::UNANCHORED, nullptr, 0);
}

std::vector<std::string> Regex::findAll(std::string_view text, int group) const
{
    std::vector<std::string> out;
    if (group < 0 || group > groupCount())
        return out;
    std::vector<re2::StringPiece> found(static_cast<std::size_t>(group) + 1);
    // RE2 sees the whole text from every start, so \b and ^ judge the bytes before it as std::regex does.
    for (std::size_t at = 0; at <= text.size();) {
        if (!m_re->Match(piece(text), at, text.size(), RE2::UNANCHORED, found.data(), static_cast<int>(found.size())))
            break;
        const re2::StringPiece& g = found[static_cast<std::size_t>(group)];
        out.emplace_back(g.data() ? std::string(g.data(), g.size()) : std::string());
        const std::size_t end = static_cast<std::size_t>(found[0].data() - text.data()) + found[0].size();
        at = found[0].empty() ? end + 1 : end;
    }
    return out;
}

int Regex::groupCount() const { return m_re->NumberOfCapturingGroups(); }

} // namespace tessera
