// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/text_file.h"

#include <fstream>
#include <sstream>

namespace tessera {

std::optional<std::string> readTextFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad())
        return std::nullopt;
    return text.str();
}

} // namespace tessera
