// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <string>
#include <vector>

namespace tessera {

/// The lines an error message lists its items on: each indented on its own line, at most `max` of them, then how
/// many more there are. A long list (every missing tensor of a large model) stays readable in a terminal.
inline std::string listedItems(const std::vector<std::string>& items, std::size_t max)
{
    std::string s;
    for (std::size_t i = 0; i < items.size() && i < max; ++i)
        s += "\n  " + items[i];
    if (items.size() > max)
        s += "\n  … and " + std::to_string(items.size() - max) + " more";
    return s;
}

} // namespace tessera
