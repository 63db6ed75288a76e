// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <string>
#include <string_view>

namespace tessera {

/// `text` safe to print on a terminal or put in JSON: valid UTF-8 is kept, control characters (ANSI escapes,
/// newlines, NUL, DEL, C1 controls, bidirectional overrides) and bytes that are not UTF-8 become \xNN, byte by byte.
/// Tensor names and file contents come from other people's files, and a name must not be able to rewrite the
/// screen it is shown on.
std::string printableText(std::string_view text);

/// True when `text` needs no escaping (printableText(text) == text).
bool isPrintableText(std::string_view text);

} // namespace tessera
