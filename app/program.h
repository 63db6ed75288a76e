// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Which executable the commands run in. Tessera ships two, built from the same code: the headless `tessera-cli`
// (the commands only: it links no Qt, so cluster nodes run it without a desktop stack) and the workbench `tessera`,
// which opens the workbench and runs every headless command too. What a command prints names the program the user
// ran, so a hint such as "run 'tessera-cli merge --status T'" works where only tessera-cli is installed.

#include <string_view>

namespace tessera::cli {

struct Program {
    std::string_view name; ///< how users type it: "tessera-cli" or "tessera"
    bool workbench;        ///< whether `gui` (and no command at all) opens the workbench
};

/// Defined once by each executable's main file (cli_main.cpp, main.cpp); nothing else defines it, so a program
/// cannot name itself twice.
extern const Program kProgram;

} // namespace tessera::cli
