// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Prefix and suffix tests of text (names of files, tensors, keys), and the cutting of a list at a separator, which
// C++17's strings lack.

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

inline bool startsWith(std::string_view text, std::string_view prefix)
{
    return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

inline bool endsWith(std::string_view text, std::string_view suffix)
{
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// `text` cut at every `separator`, empty parts kept ("1,,2" is three parts), so a stray separator is seen.
inline std::vector<std::string> splitText(std::string_view text, char separator)
{
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (std::size_t at; (at = text.find(separator, start)) != std::string_view::npos; start = at + 1)
        parts.emplace_back(text.substr(start, at - start));
    parts.emplace_back(text.substr(start));
    return parts;
}

} // namespace tessera
