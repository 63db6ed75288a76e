// SPDX-License-Identifier: GPL-3.0-or-later
#include "command_line.h"

#include "cli_args.h"
#include "command_name.h"
#include "commands.h"
#include "program.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include <filesystem>
#include <iostream>
#include <system_error>

#include <unistd.h>

namespace tessera::cli {

namespace {

/// The workbench installed beside this executable (the tessera package puts /usr/bin/tessera beside
/// /usr/bin/tessera-cli), or "" when there is none.
std::string workbenchBeside()
{
    std::error_code error;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error)
        return {};
    const auto workbench = self.parent_path() / "tessera";
    return ::access(workbench.c_str(), X_OK) == 0 ? workbench.string() : std::string();
}

/// `tessera-cli gui`: the workbench is another program; say where it is, or which package brings it.
int pointToWorkbench()
{
    const std::string workbench = workbenchBeside();
    std::cerr << kProgram.name << ": the workbench is another program, ";
    if (!workbench.empty())
        std::cerr << "beside this one: run " << workbench << " (or " << workbench << " gui PATH)\n";
    else
        std::cerr << "in the package tessera: install it (apt install tessera), then run tessera "
                     "(or tessera gui PATH)\n";
    return ExitUsage;
}

} // namespace

std::string usageText()
{
    const std::string name(kProgram.name);
    std::string text = "usage: " + name + (kProgram.workbench ? " [COMMAND]" : " COMMAND") + " [ARGS…]\n\n";
    text += "Turn the shards of a distributed training run into a complete Hugging Face model, and show why when it "
            "can't.\n";
    text += kProgram.workbench
        ? "The commands besides gui run headless, as they do in tessera-cli, which links no GUI library.\n"
        : "The command line alone: it needs no display and links no GUI library (the workbench is 'tessera').\n";
    text += "\ncommands:\n";
    if (kProgram.workbench)
        text += "  gui [PATH]      open the workbench (the default when no command is given)\n";
    text += R"(  inspect PATH    detect the layout and describe tensors, placements and problems
  merge           merge a checkpoint into a Hugging Face safetensors folder
  test            merge in memory and compare with a reference model
  diff A B        compare two checkpoints tensor by tensor
  split           write a Hugging Face model (or reshard any checkpoint) as FSDP2, DCP or Megatron
  drift RUN       how every tensor of a training run moved between saved steps, and where NaN/Inf appeared

options:
  -h, --help      show this help and exit
  --version       print the version and exit

)";
    text += "Run '" + name + " COMMAND --help' for the options of a command.\n"
            "Exit codes: 0 success, 1 problems found or the operation failed, 2 bad usage.\n";
    return text;
}

int runCommandLine(std::vector<std::string> args)
{
    const std::string command = args.front();
    args.erase(args.begin());
    setCommandName(kProgram.name); // for the commands the core's messages suggest
    // Everything a headless command prints passes one gate: names from checkpoints cannot drive the terminal.
    const TerminalEscaping escaping;
    if (command == "gui" && !kProgram.workbench)
        return pointToWorkbench();
    installInterruptHandler();
    if (command == "inspect")
        return runInspect(args);
    if (command == "merge")
        return runMerge(args);
    if (command == "test")
        return runTest(args);
    if (command == "diff")
        return runDiff(args);
    if (command == "split")
        return runSplit(args);
    if (command == "drift")
        return runDrift(args);
    if (command == "-h" || command == "--help" || command == "help") {
        std::cout << usageText();
        return ExitOk;
    }
    if (command == "--version" || command == "-V" || command == "version") {
        std::cout << kProgram.name << " " << TESSERA_VERSION << "\n";
        return ExitOk;
    }
    std::cerr << kProgram.name << ": unknown command '" << command << "'\n\n" << usageText();
    return ExitUsage;
}

} // namespace tessera::cli
