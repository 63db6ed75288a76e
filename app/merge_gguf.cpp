// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge_gguf.h"

#include "merge_parts_cli.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "io/byte_size.h"
#include "io/printable.h"
#include "merge/gguf_plan.h"
#include "publish/staged_run.h"

#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>

namespace tessera::cli {

void addGgufMergeOptions(ArgParser& parser)
{
    parser.addOption("format", "FORMAT", "safetensors (a Hugging Face folder) or gguf (one file for llama.cpp, "
                                         "Ollama, LM Studio: TARGET/<name>-<outtype>.gguf)", "safetensors");
    parser.addOption("outtype", "TYPE", "with --format gguf: " + ggufOutTypeChoices() + " (norms and 1-D tensors "
                                        "stay f32, as llama.cpp's converter writes them)",
                     ggufOutTypeName(kDefaultGgufOutType));
    parser.addOption("name", "NAME", "with --format gguf: general.name and the file name's stem",
                     "config.json's _name_or_path or the checkpoint's folder");
}

bool wantsGguf(const ArgParser& parser, int& exitCode)
{
    const std::string format = parser.value("format");
    if (format == "gguf")
        return true;
    if (format != "safetensors")
        exitCode = reportFailure(parser, "--format must be safetensors or gguf (got '" + format + "')", ExitUsage);
    else if (parser.isSet("outtype") || parser.isSet("name"))
        exitCode = reportFailure(parser, std::string("--") + (parser.isSet("outtype") ? "outtype" : "name")
                                             + " is for --format gguf (a safetensors merge takes --dtype)",
                                 ExitUsage);
    return false;
}

int runGgufMerge(const ArgParser& parser, MergeSetup& setup)
{
    const bool json = parser.isSet("json");
    auto fail = [&](int code, const std::string& message) { return reportFailure(parser, message, code); };
    GgufOptions options;
    if (parser.isSet("outtype")) {
        options.outType = ggufOutTypeFromName(parser.value("outtype"));
        if (!options.outType)
            return fail(ExitUsage, "--outtype must be " + ggufOutTypeChoices() + " (got '" + parser.value("outtype")
                                       + "')");
    }
    if (parser.isSet("dtype"))
        return fail(ExitUsage, "--dtype is for safetensors output; with --format gguf use --outtype");
    for (const char* flag : { "max_shard_size", "peft_target_dir", "save_intermediate", "verify_replicas" })
        if (parser.isSet(flag))
            return fail(ExitUsage, std::string("--") + flag + " is not used with --format gguf");
    if (setup.lora)
        return fail(ExitProblems, "a LoRA checkpoint: merge it into a Hugging Face folder first (--lora fused) and "
                                  "export that folder with --format gguf");
    options.name = parser.isSet("name") ? parser.value("name") : std::string();
    options.hfConfigDir = setup.options.hfConfigDir;
    options.forceTieWordEmbeddings = setup.options.forceTieWordEmbeddings;
    options.threads = setup.options.threads;
    const std::string target = parser.value("target_dir");
    if (target.empty())
        return fail(ExitUsage, "--target_dir: needs a folder name (it is empty)");

    auto plan = planGgufMerge(*setup.info, options);
    if (!plan)
        return fail(ExitProblems, plan.error().message);
    setup.debug.stage("plan");
    if (isPartRun(parser)) // --part K/N: this process's byte ranges of the file
        return runGgufPartCommand(parser, setup, *plan, target);
    if (parser.isSet("dry_run")) {
        if (auto usable = checkGgufTarget(*plan, target); !usable)
            return fail(ExitProblems, usable.error().message);
        if (auto free = StagedRun::checkFree(target); !free)
            return fail(ExitProblems, free.error().message);
        if (json)
            std::cout << jsonText(ggufPlanToJson(*plan)) << "\n";
        else
            std::cout << ggufPlanSummary(*plan, parser.isSet("tensors"));
        return ExitOk;
    }
    const bool quiet = parser.isSet("quiet") || json;
    if (!quiet)
        for (const auto& w : plan->warnings)
            printMessage("merge", "warning", w);
    MergeRunOptions run;
    run.threads = setup.threads;
    TerminalProgress progress("Exporting", TerminalProgress::Unit::Bytes, quiet);
    run.progress = &progress;
    run.onNote = [quiet](const std::string& note) {
        if (!quiet)
            printMessage("merge", "note", note);
    };
    auto outcome = writeGgufFile(*plan, target, run);
    progress.finish();
    setup.debug.stage("write");
    if (!outcome)
        return fail(ExitProblems, outcome.error().isCanceled() ? "canceled; nothing was written"
                                                                        : outcome.error().message);
    for (const auto& w : outcome->warnings)
        printMessage("merge", "warning", w);
    if (json) {
        std::cout << jsonText({ { "output_dir", outcome->outputDir }, { "files", outcome->files },
                                { "format", "gguf" }, { "architecture", plan->architecture },
                                { "outtype", ggufOutTypeName(plan->outType) }, { "total_size", outcome->bytesWritten },
                                { "seconds", outcome->seconds }, { "tensors", plan->tensors.size() },
                                { "dropped", plan->dropped }, { "warnings", outcome->warnings },
                                { "notes", outcome->notes } })
                  << "\n";
    } else if (!parser.isSet("quiet")) {
        std::cout << "Exported " << plan->tensors.size() << " tensors as GGUF (" << plan->architecture << ", "
                  << ggufOutTypeName(plan->outType) << ", " << formatBytes(outcome->bytesWritten) << ") into "
                  << printableText(outcome->outputDir) << " in " << std::fixed
                  << std::setprecision(outcome->seconds < 10 ? 2 : 1) << outcome->seconds << " s\n  "
                  << printableText(plan->fileName) << "\n";
    }
    return ExitOk;
}

} // namespace tessera::cli
