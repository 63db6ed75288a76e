// SPDX-License-Identifier: GPL-3.0-or-later
// tessera inspect PATH [--json] [--hf_model_path DIR]

#include "cli_args.h"
#include "commands.h"
#include "terminal_progress.h"

#include "checkpoint_report.h"
#include "scan.h"

#include <nlohmann/json.hpp>

#include <iostream>

namespace tessera::cli {

int runInspect(const std::vector<std::string>& args)
{
    ArgParser parser("inspect", "PATH [--json] [--hf_model_path DIR]",
                     "Detect the layout of a checkpoint and describe it: parallel configuration, every tensor with\n"
                     "its dtype, global shape and the pieces each rank holds, and every problem found. Reads only\n"
                     "headers and pickles, never tensor data.");
    parser.addPositional("PATH", "checkpoint folder (run root, global_step_N, actor/, DCP, Megatron, HF) or file");
    parser.addSwitch("json", "print one JSON object on stdout instead of the summary");
    parser.addSwitch("tensors", "list every tensor in the summary");
    parser.addOption("hf_model_path", "DIR", "folder with config.json and the tokenizer, if not found automatically");
    parser.addOption("threads", "N", "files read in parallel", "number of cores");
    if (!parser.parse(args))
        return usageError(parser);
    if (parser.helpRequested()) {
        std::cout << parser.helpText();
        return ExitOk;
    }
    ScanOptions options;
    options.hfModelPath = parser.value("hf_model_path");
    if (parser.isSet("threads"))
        options.threads = std::atoi(parser.value("threads").c_str());
    TerminalProgress progress("Scanning", TerminalProgress::Unit::Items, parser.isSet("json"));
    auto info = scanCheckpoint(parser.positional("PATH"), options, progress);
    progress.finish();
    if (!info) {
        if (parser.isSet("json"))
            std::cout << nlohmann::json { { "error", info.error().message } }.dump(2) << "\n";
        std::cerr << "tessera inspect: " << info.error().message << "\n";
        return ExitProblems;
    }
    if (parser.isSet("json"))
        std::cout << checkpointToJson(*info).dump(2) << "\n";
    else
        std::cout << checkpointSummary(*info, parser.isSet("tensors"));
    return info->problems.empty() ? ExitOk : ExitProblems;
}

} // namespace tessera::cli
