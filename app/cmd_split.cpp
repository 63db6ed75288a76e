// SPDX-License-Identifier: GPL-3.0-or-later
// `tessera split`: a Hugging Face model, or any checkpoint Tessera reads, written as a distributed checkpoint.
// argv → SplitRequest → prepareSplit() → runPreparedSplit() → what it wrote, printed.

#include "commands.h"
#include "merge_common.h"
#include "merge_parts_cli.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "io/byte_size.h"
#include "io/printable.h"
#include "ops/prepare_split.h"
#include "ops/target_entries.h"
#include "split/split_training.h"

#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>

namespace tessera::cli {

namespace {

void printJson(const nlohmann::json& j) { std::cout << jsonText(j) << "\n"; }

/// A target that already holds other files: the split keeps them, and says so (never silently).
void noteOtherFiles(const PreparedSplit& prepared)
{
    if (!prepared.otherFiles.empty() && !prepared.request.silent())
        printMessage("split", "note", keptFilesNote(*prepared.request.targetDir, prepared.otherFiles, "split"));
}

/// --dry-run: the plan as the split would write it (the target checked as the split checks it).
int printDryRun(const ArgParser& parser, const PreparedSplit& prepared)
{
    if (!prepared.target)
        return reportFailure(parser, prepared.target.error().message);
    noteOtherFiles(prepared);
    if (prepared.request.json)
        printJson(splitPlanToJson(*prepared.plan, prepared.model.primary()));
    else
        std::cout << splitPlanSummary(*prepared.plan, prepared.model.primary(), prepared.request.tensors);
    return ExitOk;
}

void printSplit(const PreparedSplit& prepared, const SplitOutcome& outcome)
{
    const SplitPlan& plan = *prepared.plan;
    if (prepared.request.json) {
        printJson({ { "output_dir", outcome.outputDir }, { "format", splitFormatName(plan.format) },
                    { "layout", plan.layout }, { "files", outcome.files }, { "total_size", outcome.bytesWritten },
                    { "seconds", outcome.seconds }, { "notes", outcome.notes } });
        return;
    }
    if (prepared.request.quiet)
        return;
    const double rate = outcome.seconds > 0 ? static_cast<double>(outcome.bytesWritten) / outcome.seconds : 0;
    std::cout << "Split " << prepared.model.primary().tensors.size() << " tensors"
              << (plan.training ? " and the training state" : "") << " (" << formatBytes(outcome.bytesWritten)
              << ") into " << printableText(outcome.outputDir) << " as " << plan.layout << " in " << std::fixed
              << std::setprecision(outcome.seconds < 10 ? 2 : 1) << outcome.seconds << " s ("
              << formatBytes(static_cast<std::uint64_t>(rate)) << "/s)\n";
    const std::size_t shown = std::min<std::size_t>(outcome.files.size(), 12);
    for (std::size_t i = 0; i < shown; ++i)
        std::cout << "  " << printableText(outcome.files[i]) << "\n";
    if (shown < outcome.files.size())
        std::cout << "  … and " << outcome.files.size() - shown << " more\n";
}

/// Writes the prepared split with a progress bar, then says what was written.
int writeSplit(const ArgParser& parser, const PreparedSplit& prepared, DebugLog& debug)
{
    const bool quiet = prepared.request.silent();
    if (!quiet) {
        for (const auto& w : prepared.model.primary().warnings)
            printMessage("split", "warning", w);
        for (const auto& w : prepared.plan->warnings)
            printMessage("split", "note", w);
        // What of the run's training state goes with the model, and what does not.
        if (const auto& training = prepared.plan->training)
            for (const auto& note : training->notes)
                printMessage("split", "note", note);
    }
    noteOtherFiles(prepared);
    TerminalProgress progress("Splitting", TerminalProgress::Unit::Bytes, quiet);
    SplitRunOptions run;
    run.progress = &progress;
    run.onNote = [quiet](const std::string& note) {
        if (!quiet)
            printMessage("split", "note", note);
    };
    auto outcome = runPreparedSplit(prepared, run);
    progress.finish();
    debug.stage("write");
    if (!outcome)
        return reportFailure(parser, runFailureText(outcome.error()));
    printSplit(prepared, *outcome);
    return ExitOk;
}

} // namespace

int runSplit(const std::vector<std::string>& args)
{
    ArgParser parser = SplitRequest::parser();
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    const SplitRequest request = SplitRequest::fromParser(parser);
    if (request.status) // --status TARGET: where a split in parts is
        return runPartStatus(parser);
    if (const Status valid = request.validate(); !valid)
        return reportFailure(parser, valid.error().message, ExitUsage);
    DebugLog debug(request.debug);
    const PreparedSplit prepared = prepareForCommand("split", request, debug, [](const auto& r, const PrepareContext& c) {
        return prepareSplit(r, c);
    });
    if (prepared.refusal)
        return reportRefusal(parser, *prepared.refusal);
    if (request.isPartRun()) // --part K/N: this process's files
        return runSplitPartCommand(parser, *prepared.settings.part, prepared.model.primaryInfo(),
                                   prepared.model.primary(), *prepared.plan, *request.targetDir);
    if (request.dryRun)
        return printDryRun(parser, prepared);
    return writeSplit(parser, prepared, debug);
}

} // namespace tessera::cli
