// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/flag_table.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace tessera {

std::string shellQuoted(const std::string& word)
{
    const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return std::isalnum(u) || std::string_view("_./:=@+-").find(c) != std::string_view::npos;
    });
    if (plain)
        return word;
    std::string quoted = "'";
    for (char c : word)
        quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

std::string commandLineText(const std::string& command, const std::vector<std::string>& args)
{
    std::string text = "tessera " + command;
    for (const auto& a : args)
        text += " " + shellQuoted(a);
    return text;
}

} // namespace tessera
