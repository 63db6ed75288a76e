// SPDX-License-Identifier: GPL-3.0-or-later
// The one `tessera` executable: no arguments or `gui` opens the workbench; other commands run headless
// and never create a QApplication, so they work without a display.

#include "commands.h"
#include "gui_main.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include <csignal>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

const char* kUsage = R"(usage: tessera [COMMAND] [ARGS…]

Turn the shards of a distributed training run into a complete Hugging Face model, and show why when it can't.

commands:
  gui [PATH]      open the workbench (the default when no command is given)
  inspect PATH    detect the layout and describe tensors, placements and problems
  merge           merge a checkpoint into a Hugging Face safetensors folder
  test            merge in memory and compare with a reference model
  diff A B        compare two checkpoints tensor by tensor
  split           write a Hugging Face model (or reshard any checkpoint) as FSDP2, DCP or Megatron

options:
  -h, --help      show this help and exit
  --version       print the version and exit

Run 'tessera COMMAND --help' for the options of a command.
Exit codes: 0 success, 1 problems found or the operation failed, 2 bad usage.
)";

} // namespace

int main(int argc, char** argv)
{
    // Past a file size limit (ulimit -f) a write then fails with EFBIG, which the merge reports and cleans up
    // after, instead of the process dying from SIGXFSZ with its temporary folder left behind.
    std::signal(SIGXFSZ, SIG_IGN);
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "gui")
        return tessera::app::runGui(argc, argv);
    // Everything a headless command prints passes one gate: names from checkpoints cannot drive the terminal.
    const tessera::cli::TerminalEscaping escaping;
    const std::string command = args[0];
    args.erase(args.begin());
    tessera::cli::installInterruptHandler();
    if (command == "inspect")
        return tessera::cli::runInspect(args);
    if (command == "merge")
        return tessera::cli::runMerge(args);
    if (command == "test")
        return tessera::cli::runTest(args);
    if (command == "diff")
        return tessera::cli::runDiff(args);
    if (command == "split")
        return tessera::cli::runSplit(args);
    if (command == "-h" || command == "--help" || command == "help") {
        std::cout << kUsage;
        return 0;
    }
    if (command == "--version" || command == "-V" || command == "version") {
        std::cout << "tessera " << TESSERA_VERSION << "\n";
        return 0;
    }
    std::cerr << "tessera: unknown command '" << command << "'\n\n" << kUsage;
    return 2;
}
