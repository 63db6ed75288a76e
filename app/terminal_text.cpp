// SPDX-License-Identifier: GPL-3.0-or-later
#include "terminal_text.h"

#include "program.h"

#include "io/printable.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <streambuf>

namespace tessera::cli {

namespace {

/// Bytes at the end of `s` that begin a UTF-8 sequence the next write may complete (0 to 3).
std::size_t incompleteUtf8Tail(std::string_view s)
{
    for (std::size_t back = 1; back <= 3 && back <= s.size(); ++back) {
        const auto b = static_cast<std::uint8_t>(s[s.size() - back]);
        if ((b & 0xC0) == 0x80)
            continue; // a continuation byte: look further back for its lead
        const std::size_t length = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        return length > back ? back : 0;
    }
    return 0;
}

/// Escapes what passes through it into `target`, as printableText() does but keeping line feeds. A UTF-8 sequence
/// split across two writes is held back until it is whole.
class EscapingBuffer final : public std::streambuf {
public:
    explicit EscapingBuffer(std::streambuf* target) : m_target(target) { }
    void finish()
    {
        forward(m_pending.size());
        m_target->pubsync();
    }

protected:
    int_type overflow(int_type c) override
    {
        if (traits_type::eq_int_type(c, traits_type::eof()))
            return traits_type::not_eof(c);
        const char byte = traits_type::to_char_type(c);
        xsputn(&byte, 1);
        return c;
    }
    std::streamsize xsputn(const char* s, std::streamsize n) override
    {
        m_pending.append(s, static_cast<std::size_t>(n));
        forward(m_pending.size() - incompleteUtf8Tail(m_pending));
        return n;
    }
    int sync() override { return m_target->pubsync(); }

private:
    /// Writes the first `bytes` pending bytes, escaped line by line.
    void forward(std::size_t bytes)
    {
        const std::string_view ready(m_pending.data(), bytes);
        std::string out;
        for (std::size_t start = 0; start < ready.size();) {
            const std::size_t end = std::min(ready.find('\n', start), ready.size());
            out += printableText(ready.substr(start, end - start));
            if (end < ready.size())
                out += '\n';
            start = end + 1;
        }
        m_target->sputn(out.data(), static_cast<std::streamsize>(out.size()));
        m_pending.erase(0, bytes);
    }

    std::streambuf* m_target;
    std::string m_pending;
};

} // namespace

struct TerminalEscaping::Streams {
    std::streambuf* out = std::cout.rdbuf();
    std::streambuf* err = std::cerr.rdbuf();
    EscapingBuffer escapedOut { out };
    EscapingBuffer escapedErr { err };
};

TerminalEscaping::TerminalEscaping() : m_streams(std::make_unique<Streams>())
{
    std::cout.rdbuf(&m_streams->escapedOut);
    std::cerr.rdbuf(&m_streams->escapedErr);
}

TerminalEscaping::~TerminalEscaping()
{
    std::cout.flush();
    std::cerr.flush();
    m_streams->escapedOut.finish();
    m_streams->escapedErr.finish();
    std::cout.rdbuf(m_streams->out);
    std::cerr.rdbuf(m_streams->err);
}

std::string printableMessage(std::string_view message)
{
    constexpr std::string_view kItemBreak = "\n  ";
    std::string out;
    for (std::size_t start = 0;;) {
        const std::size_t end = message.find(kItemBreak, start);
        out += printableText(message.substr(start, end == std::string_view::npos ? end : end - start));
        if (end == std::string_view::npos)
            return out;
        out += kItemBreak;
        start = end + kItemBreak.size();
    }
}

void printMessage(const std::string& command, const std::string& kind, const std::string& message)
{
    std::cerr << kProgram.name << " " << command << ": " << (kind.empty() ? "" : kind + ": ") << printableMessage(message)
              << "\n";
}

std::string jsonText(const nlohmann::json& j)
{
    const std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    // Valid UTF-8 now, with every control character below U+0020 escaped. The other characters printableText()
    // escapes (DEL, C1 controls, bidirectional controls) can only stand inside strings (JSON's own syntax is ASCII),
    // where \uXXXX means the same character.
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        std::size_t length = 1;
        const auto lead = static_cast<std::uint8_t>(text[i]);
        if (lead >= 0xC0)
            length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        const std::string_view character(text.data() + i, std::min(length, text.size() - i));
        if (lead == '\n' || isPrintableText(character)) { // line feeds are the indentation's, outside strings
            out += character;
        } else {
            // The code point of a whole sequence: nlohmann's output is valid UTF-8.
            std::uint32_t cp = length == 1 ? lead : lead & (0x7F >> length);
            for (std::size_t k = 1; k < character.size(); ++k)
                cp = (cp << 6) | (static_cast<std::uint8_t>(character[k]) & 0x3F);
            // Only controls reach here (C0, DEL, C1, the bidirectional ones): all below U+FFFF, one \uXXXX each.
            char escaped[16];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(cp & 0xFFFF));
            out += escaped;
        }
        i += character.size();
    }
    return out;
}

int reportFailure(const ArgParser& parser, const std::string& message, int code)
{
    if (parser.isSet("json"))
        std::cout << jsonText(nlohmann::json { { "error", message } }) << "\n";
    printMessage(parser.command(), "", message);
    return code;
}

} // namespace tessera::cli
