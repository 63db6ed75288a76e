// SPDX-License-Identifier: GPL-3.0-or-later
// tessera merge --local_dir D --target_dir O [...]: verl's model_merger, streaming and bit-exact.
// argv → MergeRequest → prepareMerge() → runPreparedMerge() → what it did, printed.

#include "cli_args.h"
#include "commands.h"
#include "merge_common.h"
#include "merge_gguf.h"
#include "merge_parts_cli.h"
#include "merge_report.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "io/byte_size.h"
#include "io/printable.h"
#include "ops/prepare_merge.h"
#include "ops/target_entries.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iomanip>
#include <iostream>

namespace tessera::cli {

namespace {

/// A target that holds files the merge neither writes nor replaces: they are kept, and said so (never silently).
void noteOtherFiles(const PreparedMerge& prepared)
{
    if (!prepared.otherFiles.empty() && !prepared.request.silent())
        printMessage("merge", "note", keptFilesNote(prepared.request.target(), prepared.otherFiles, "merge"));
}

/// --dry-run: the plans as the merge would write them (the target checked as the merge checks it).
int printDryRun(const ArgParser& parser, const PreparedMerge& prepared)
{
    if (!prepared.target)
        return reportFailure(parser, prepared.target.error().message);
    noteOtherFiles(prepared);
    if (prepared.gguf)
        return printGgufDryRun(parser, *prepared.gguf);
    const auto outputs = prepared.outputs();
    const auto& lora = prepared.model.loraPlans;
    if (prepared.request.json) {
        nlohmann::json j = mergePlanToJson(*outputs.front().plan, *outputs.front().info);
        if (lora) {
            // A LoRA merge: the fused model's plan (if any) at the top level, the adapter's under "lora_adapter".
            if (!lora->fused)
                j = nlohmann::json::object();
            if (lora->adapter)
                j["lora_adapter"] = mergePlanToJson(*lora->adapter, prepared.model.lora->adapter);
            j["lora_notes"] = lora->notes;
        }
        std::cout << jsonText(j) << "\n";
        return ExitOk;
    }
    const bool tensors = prepared.request.tensors;
    for (const auto& o : outputs) {
        if (!o.subfolder.empty())
            std::cout << "\n" << o.subfolder << "/ (the LoRA adapter, as PEFT saves it)\n";
        std::cout << mergePlanSummary(*o.plan, *o.info, tensors);
    }
    if (const auto adapter = prepared.adapterOutput())
        std::cout << "\n" << printableText(*prepared.request.peftTargetDir) << " (the LoRA adapter, as PEFT saves it)\n"
                  << mergePlanSummary(*adapter->plan, *adapter->info, tensors);
    return ExitOk;
}

/// What a finished safetensors merge wrote.
void printMerged(const PreparedMerge& prepared, const MergeOutcome& outcome)
{
    std::size_t tensors = 0;
    std::vector<std::string> dropped;
    auto outputs = prepared.outputs();
    if (const auto adapter = prepared.adapterOutput())
        outputs.push_back(*adapter);
    for (const auto& o : outputs) {
        tensors += o.plan->tensors.size();
        dropped.insert(dropped.end(), o.plan->dropped.begin(), o.plan->dropped.end());
    }
    const auto& lora = prepared.model.loraPlans;
    if (prepared.request.json) {
        nlohmann::json j { { "output_dir", outcome.outputDir }, { "files", outcome.files },
                           { "total_size", outcome.bytesWritten }, { "seconds", outcome.seconds },
                           { "tensors", tensors }, { "dropped", dropped },
                           { "warnings", outcome.warnings }, { "notes", outcome.notes } };
        if (lora) {
            j["lora_fused"] = lora->fused ? lora->fused->fusedTensors : 0;
            j["lora_adapter"] = lora->adapter ? lora->adapterFolder : "";
            j["lora_notes"] = lora->notes;
        }
        std::cout << jsonText(j) << "\n";
        return;
    }
    if (prepared.request.quiet)
        return;
    const double rate = outcome.seconds > 0 ? static_cast<double>(outcome.bytesWritten) / outcome.seconds : 0;
    std::cout << "Merged " << tensors << " tensors (" << formatBytes(outcome.bytesWritten) << ") into "
              << printableText(outcome.outputDir) << " in " << std::fixed
              << std::setprecision(outcome.seconds < 10 ? 2 : 1) << outcome.seconds << " s ("
              << formatBytes(static_cast<std::uint64_t>(rate)) << "/s)\n";
    if (lora && lora->fused)
        std::cout << "  " << lora->fused->fusedTensors << " weights fused with their LoRA update\n";
    for (const auto& f : outcome.files)
        std::cout << "  " << printableText(f) << "\n";
}

/// Writes the prepared merge with a progress bar, then says what was written.
int writeMerge(const ArgParser& parser, const PreparedMerge& prepared, DebugLog& debug)
{
    const bool quiet = prepared.request.silent();
    if (!quiet)
        for (const auto& o : prepared.outputs())
            for (const auto& w : o.plan->warnings)
                printMessage("merge", "warning", o.subfolder.empty() ? w : o.subfolder + "/: " + w);
    if (!quiet && prepared.gguf)
        for (const auto& w : prepared.gguf->warnings)
            printMessage("merge", "warning", w);
    noteOtherFiles(prepared);
    TerminalProgress progress(prepared.gguf ? "Exporting" : "Merging", TerminalProgress::Unit::Bytes, quiet);
    MergeRunOptions run;
    run.progress = &progress;
    run.onNote = [quiet](const std::string& note) {
        if (!quiet)
            printMessage("merge", "note", note);
    };
    if (prepared.request.saveIntermediate)
        run.beforePublish = [&](const std::string& dir, const std::vector<std::string>& files) {
            const auto target = std::filesystem::absolute(prepared.request.target()).lexically_normal().string();
            const auto rows = prepared.model.mapping ? prepared.model.mapping->rows : std::vector<MappingRow>();
            return writeMergeReport(dir, target, prepared.outputs(), files, rows);
        };
    auto outcome = runPreparedMerge(prepared, run);
    progress.finish();
    debug.stage("write");
    if (!outcome)
        return reportFailure(parser, runFailureText(outcome.error()));
    for (const auto& w : outcome->warnings)
        printMessage("merge", "warning", w);
    if (prepared.gguf)
        printGgufExported(prepared.request, *prepared.gguf, *outcome);
    else
        printMerged(prepared, *outcome);
    return ExitOk;
}

} // namespace

int runMerge(const std::vector<std::string>& args)
{
    ArgParser parser = MergeRequest::parser();
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    const MergeRequest request = MergeRequest::fromParser(parser);
    if (request.status) // --status TARGET: where a merge in parts is
        return runPartStatus(parser);
    if (const Status valid = request.validate(); !valid)
        return reportFailure(parser, valid.error().message, ExitUsage);
    DebugLog debug(request.debug);
    const PreparedMerge prepared = prepareForCommand("merge", request, debug, [](const auto& r, const PrepareContext& c) {
        return prepareMerge(r, c);
    });
    if (prepared.refusal)
        return reportRefusal(parser, *prepared.refusal);
    if (request.isPartRun()) // --part K/N: this process's share of the output
        return runMergePartCommand(parser, prepared, debug);
    if (!prepared.adapterTarget)
        return reportFailure(parser, prepared.adapterTarget.error().message);
    if (request.dryRun)
        return printDryRun(parser, prepared);
    return writeMerge(parser, prepared, debug);
}

} // namespace tessera::cli
