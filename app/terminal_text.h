// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What the commands print. Tensor names, metadata, config values and the messages that quote them come from other
// people's files, and a name must not be able to drive the terminal it is shown on or forge a line of output
// ("OK: …"). Two rules hold for every command:
//  - no byte that could drive a terminal reaches stdout or stderr raw: TerminalEscaping escapes every control
//    character but the line feed, DEL, C1 controls and bytes that are not UTF-8, whatever printed them;
//  - a line feed in a name never starts a line: each report escapes (printableText) the names it puts in a line,
//    and messages are printed with printableMessage().

#include "cli_args.h"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace tessera::cli {

/// While it lives, std::cout and std::cerr print as printableText() does, line feeds apart: the net under every
/// other rule, so a name printed by a path that forgot to escape it still cannot send escapes to the terminal.
class TerminalEscaping {
public:
    TerminalEscaping();
    ~TerminalEscaping();
    TerminalEscaping(const TerminalEscaping&) = delete;
    TerminalEscaping& operator=(const TerminalEscaping&) = delete;

private:
    struct Streams;
    std::unique_ptr<Streams> m_streams;
};

/// `message` (an error, a warning or a note, usually from the core) for the terminal: printableText(), except that
/// the line breaks the core starts each item of a listed message with ("\n  ") are kept.
std::string printableMessage(std::string_view message);

/// Prints "<program> <command>: <kind>: <message>" on stderr (no kind: "<program> <command>: <message>"), the program
/// being tessera-cli or tessera (program.h).
void printMessage(const std::string& command, const std::string& kind, const std::string& message);

/// `j` as every command prints JSON: indented, bytes that are not UTF-8 replaced with U+FFFD, and besides the
/// control characters JSON escapes itself, the others printableText() escapes (DEL, C1 and bidirectional controls)
/// written \uXXXX, so that no string in it can drive a terminal either.
std::string jsonText(const nlohmann::json& j);

/// A failed command: with --json the error as {"error": message} on stdout, and always the message on stderr.
/// Returns `code`.
int reportFailure(const ArgParser& parser, const std::string& message, int code = ExitProblems);

} // namespace tessera::cli
