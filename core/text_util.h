// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Prefix and suffix tests of text (names of files, tensors, keys), which C++17's strings lack.

#include <string_view>

namespace tessera {

inline bool startsWith(std::string_view text, std::string_view prefix)
{
    return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

inline bool endsWith(std::string_view text, std::string_view suffix)
{
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace tessera
