// SPDX-License-Identifier: GPL-3.0-or-later
// `tessera`, the workbench: no arguments or `gui` opens it; every other command runs headless, as in tessera-cli
// (the same code), and never creates a QApplication, so it works without a display.

#include "command_line.h"
#include "gui_main.h"
#include "program.h"

#include <csignal>
#include <string>
#include <utility>
#include <vector>

const tessera::cli::Program tessera::cli::kProgram { "tessera", true };

int main(int argc, char** argv)
{
    // Past a file size limit (ulimit -f) a write then fails with EFBIG, which the merge reports and cleans up
    // after, instead of the process dying from SIGXFSZ with its temporary folder left behind.
    std::signal(SIGXFSZ, SIG_IGN);
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "gui")
        return tessera::app::runGui(argc, argv);
    return tessera::cli::runCommandLine(std::move(args));
}
