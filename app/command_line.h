// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The headless commands as both executables run them (see program.h): `inspect`, `merge`, `test`, `diff`, `split`,
// `--help` and `--version`. Nothing here needs a display or links a Qt library.

#include <string>
#include <vector>

namespace tessera::cli {

/// The program's --help text: its commands (with `gui` when it has the workbench), options and exit codes.
std::string usageText();

/// Runs the command `args[0]` with the arguments after it and returns the exit code. `args` is everything after the
/// program's name and is not empty. In tessera-cli, `gui` says where the workbench is instead.
int runCommandLine(std::vector<std::string> args);

} // namespace tessera::cli
