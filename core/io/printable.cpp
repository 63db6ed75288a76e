// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/printable.h"

#include <cstdint>
#include <cstdio>

namespace tessera {

namespace {

/// LRM, RLM, the line and paragraph separators, the bidirectional embeddings, overrides and isolates.
bool isLayoutControl(std::uint32_t cp)
{
    return cp == 0x200E || cp == 0x200F || (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

/// Length of the printable UTF-8 sequence that starts at `i`, 0 when the bytes there are not one.
std::size_t utf8Length(std::string_view s, std::size_t i)
{
    const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(s[k]); };
    const std::uint8_t b = byte(i);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b < 0x80)
        return 1;
    if ((b & 0xE0) == 0xC0) {
        n = 2;
        cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
        n = 3;
        cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
        n = 4;
        cp = b & 0x07;
    } else {
        return 0;
    }
    if (i + n > s.size())
        return 0;
    for (std::size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not valid UTF-8.
    static const std::uint32_t minimum[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (cp < minimum[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    // C1 controls (U+0080–U+009F) act like escapes on some terminals, and the bidirectional controls and line
    // separators reorder or break what follows them: shown as their bytes.
    if ((cp >= 0x80 && cp <= 0x9F) || isLayoutControl(cp))
        return 0;
    return n;
}

bool isControl(std::uint8_t b) { return b < 0x20 || b == 0x7F; }

} // namespace

std::string printableText(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t n = utf8Length(text, i);
        if (n == 0 || (n == 1 && isControl(static_cast<std::uint8_t>(text[i])))) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned>(static_cast<std::uint8_t>(text[i])));
            out += hex;
            ++i;
            continue;
        }
        out.append(text.substr(i, n));
        i += n;
    }
    return out;
}

bool isPrintableText(std::string_view text)
{
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t n = utf8Length(text, i);
        if (n == 0 || (n == 1 && isControl(static_cast<std::uint8_t>(text[i]))))
            return false;
        i += n;
    }
    return true;
}

} // namespace tessera
