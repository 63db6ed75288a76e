// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// CSV fields for the reports' spreadsheet exports (diff, drift).

#include <nlohmann/json.hpp>

#include <string>

namespace tessera {

/// A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string csvField(const std::string& text);

/// A JSON value as a CSV field: null is empty, a string its text, anything else its JSON text.
std::string csvValue(const nlohmann::json& v);

} // namespace tessera
