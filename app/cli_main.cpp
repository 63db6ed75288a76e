// SPDX-License-Identifier: GPL-3.0-or-later
// `tessera-cli`: the headless commands alone. It links the core and no Qt library, so a merge in parts runs on
// cluster nodes that have no desktop stack; the workbench `tessera` runs the same commands from the same code.

#include "command_line.h"
#include "program.h"

#include <csignal>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

const tessera::cli::Program tessera::cli::kProgram { "tessera-cli", false };

int main(int argc, char** argv)
{
    // Past a file size limit (ulimit -f) a write then fails with EFBIG, which the merge reports and cleans up
    // after, instead of the process dying from SIGXFSZ with its temporary folder left behind.
    std::signal(SIGXFSZ, SIG_IGN);
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) {
        std::cerr << tessera::cli::usageText();
        return 2;
    }
    return tessera::cli::runCommandLine(std::move(args));
}
