// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/csv_fields.h"

namespace tessera {

std::string csvField(const std::string& text)
{
    if (text.find_first_of(",\"\r\n") == std::string::npos)
        return text;
    std::string out = "\"";
    for (char c : text)
        out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

std::string csvValue(const nlohmann::json& v)
{
    if (v.is_null())
        return {};
    if (v.is_string())
        return csvField(v.get<std::string>());
    return csvField(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

} // namespace tessera
