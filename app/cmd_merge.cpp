// SPDX-License-Identifier: GPL-3.0-or-later
// tessera merge --local_dir D --target_dir O [...]: verl's model_merger, streaming and bit-exact.

#include "cli_args.h"
#include "commands.h"
#include "merge_common.h"
#include "merge_gguf.h"
#include "merge_parts_cli.h"
#include "merge_report.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "io/byte_size.h"
#include "io/path_kinds.h"
#include "publish/staged_run.h"
#include "io/printable.h"
#include "merge/merge_engine.h"
#include "merge/lora_plan.h"
#include "merge/merge_plan.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iomanip>
#include <iostream>

namespace fs = std::filesystem;

namespace tessera::cli {

namespace {

/// Refuses a --peft_target_dir the adapter cannot be published into after the fused model: the target itself or a
/// folder inside it (the two would replace or mix each other's files), a file, a folder that cannot be written,
/// weight or tokenizer files of another model there. Checked before anything is written.
Status checkAdapterTarget(const std::string& adapterDir, const std::string& target, const MergeOutput& adapter,
                          bool fusedModel)
{
    // Symbolic links resolved, so that a link to the target is the target.
    auto resolved = [](const std::string& path) {
        std::error_code ec;
        const fs::path canonical = fs::weakly_canonical(normalTarget(path), ec);
        return ec ? normalTarget(path) : canonical;
    };
    const fs::path a = resolved(adapterDir), t = resolved(target);
    if (fusedModel) {
        const fs::path rel = a.lexically_relative(t);
        if (a == t || (!rel.empty() && *rel.begin() != ".."))
            return makeError("--peft_target_dir " + adapterDir + (a == t ? " is" : " is inside") + " the --target_dir "
                             + target + ", which the fused model is published into as a whole; give the adapter a "
                             "folder of its own, or leave --peft_target_dir out to write it into "
                             + (t / "lora_adapter").string());
    }
    const Status usable = checkMergeTargets({ adapter }, adapterDir);
    if (!usable)
        return usable.error().withContext("--peft_target_dir");
    return Status::success();
}

} // namespace

int runMerge(const std::vector<std::string>& args)
{
    ArgParser parser("merge", "--local_dir DIR --target_dir DIR [options]",
                     "Merge a distributed checkpoint (verl FSDP/FSDP2/HSDP, DTensor, ShardedTensor, DCP, or Megatron\n"
                     "legacy, Megatron-LM and torch_dist with their names mapped to Hugging Face's) into a\n"
                     "Hugging Face safetensors folder, bit for bit, streaming tensor by tensor. config.json,\n"
                     "generation_config.json, tokenizer files, chat templates and remote-code *.py are copied from\n"
                     "the config folder. The output appears atomically: on error or Ctrl-C nothing is left behind.\n"
                     "With --format gguf it writes one GGUF file for llama.cpp instead.");
    addCommonMergeOptions(parser);
    addGgufMergeOptions(parser);
    parser.addOption("target_dir", "DIR", "output folder (created; existing files of other names are kept)", "tmp");
    parser.addOption("max_shard_size", "SIZE", "largest output file before sharding (500MB, 2GiB, …)", "5GB");
    parser.addSwitch("dry_run", "print the merge plan (tensors, copy steps, files, memory, disk) and write nothing");
    parser.addSwitch("verify_replicas", "check that replicated pieces on other ranks are identical to the one written");
    parser.addSwitch("tensors", "with --dry-run: list every tensor and how it is copied");
    parser.addOption("peft_target_dir", "DIR", "LoRA: write the PEFT adapter into DIR instead of TARGET/lora_adapter "
                                               "(published on its own, after the fused model)");
    parser.addSwitch("save_intermediate", "also write merge_report.json into the target: every written tensor with "
                                          "its source pieces, mapping rule, transform and CRC-32");
    parser.addOption("hf_upload_path", "REPO", "not supported: upload the folder with 'huggingface-cli upload'");
    parser.addSwitch("private", "accepted for compatibility with verl (upload is not supported)");
    addPartOptions(parser);
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    if (const auto exitCode = checkPartFlags(parser)) // --part K/N, --status TARGET
        return *exitCode;
    if (parser.isSet("hf_upload_path"))
        return reportFailure(parser, "--hf_upload_path is not supported; merge, then run 'huggingface-cli upload "
                                         + parser.value("hf_upload_path") + " " + parser.value("target_dir") + "'",
                             ExitUsage);
    int formatExit = -1;
    const bool gguf = wantsGguf(parser, formatExit);
    if (formatExit >= 0)
        return formatExit;
    auto setup = prepareMerge(parser, "merge");
    if (setup.exitCode >= 0)
        return setup.exitCode;
    if (gguf)
        return runGgufMerge(parser, setup);
    auto maxShard = parseByteSize(parser.value("max_shard_size"));
    if (!maxShard || *maxShard == 0)
        return reportFailure(parser, "--max_shard_size: " + (maxShard ? std::string("must be more than 0")
                                                                       : maxShard.error().message),
                             ExitUsage);
    setup.options.maxShardSize = *maxShard;
    const bool json = parser.isSet("json");
    const std::string target = parser.value("target_dir");
    if (target.empty())
        return reportFailure(parser, "--target_dir: needs a folder name (it is empty)", ExitUsage);

    auto planned = planSetup(setup);
    if (!planned)
        return reportFailure(parser, planned.error().message);
    auto outputs = planned->outputs(setup);
    // --peft_target_dir: the adapter is published into its own folder, after the fused model.
    std::optional<MergeOutput> separateAdapter;
    if (parser.isSet("peft_target_dir")) {
        if (parser.value("peft_target_dir").empty())
            return reportFailure(parser, "--peft_target_dir: needs a folder name (it is empty)", ExitUsage);
        if (!setup.lora)
            return reportFailure(parser, "--peft_target_dir is for LoRA checkpoints, and " + parser.value("local_dir")
                                             + " holds no LoRA tensors",
                                 ExitUsage);
        for (auto it = outputs.begin(); it != outputs.end(); ++it)
            if (!it->subfolder.empty()) {
                separateAdapter = *it;
                separateAdapter->subfolder.clear();
                outputs.erase(it);
                break;
            }
    }
    if (isPartRun(parser))
        return runMergePartCommand(parser, setup, outputs, target);
    const std::string peftTarget = parser.value("peft_target_dir");
    if (separateAdapter)
        if (const Status usable = checkAdapterTarget(peftTarget, target, *separateAdapter, !outputs.empty()); !usable) {
            if (json)
                std::cout << nlohmann::json { { "error", usable.error().message } }.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
            std::cerr << "tessera merge: " << usable.error().message << "\n";
            return ExitProblems;
        }
    // Each model's label in summaries: the sub-folder it goes into, or nothing for the target itself.
    auto label = [](const MergeOutput& o) { return o.subfolder.empty() ? std::string() : o.subfolder + "/"; };
    if (parser.isSet("dry_run")) {
        // A plan that the real merge would refuse is not OK: check the target as the merge does.
        Status usable = outputs.empty() ? Status::success() : checkMergeTargets(outputs, target);
        if (usable && !outputs.empty())
            usable = StagedRun::checkFree(target);
        if (!usable)
            return reportFailure(parser, usable.error().message);
        if (json) {
            nlohmann::json j = mergePlanToJson(*outputs.front().plan, *outputs.front().info);
            if (planned->lora) {
                // A LoRA merge: the fused model's plan (if any) at the top level, the adapter's under "lora_adapter".
                if (!planned->lora->fused)
                    j = nlohmann::json::object();
                if (planned->lora->adapter)
                    j["lora_adapter"] = mergePlanToJson(*planned->lora->adapter, setup.lora->adapter);
                j["lora_notes"] = planned->lora->notes;
            }
            std::cout << jsonText(j) << "\n";
        } else {
            for (const auto& o : outputs) {
                if (!o.subfolder.empty())
                    std::cout << "\n" << o.subfolder << "/ (the LoRA adapter, as PEFT saves it)\n";
                std::cout << mergePlanSummary(*o.plan, *o.info, parser.isSet("tensors"));
            }
            if (separateAdapter)
                std::cout << "\n" << printableText(peftTarget) << " (the LoRA adapter, as PEFT saves it)\n"
                          << mergePlanSummary(*separateAdapter->plan, *separateAdapter->info, parser.isSet("tensors"));
        }
        return ExitOk;
    }
    const bool quiet = parser.isSet("quiet") || json;
    if (!quiet)
        for (const auto& o : outputs)
            for (const auto& w : o.plan->warnings)
                printMessage("merge", "warning", label(o) + (label(o).empty() ? "" : ": ") + w);

    MergeRunOptions run;
    run.threads = setup.threads;
    run.verifyReplicas = parser.isSet("verify_replicas");
    TerminalProgress progress("Merging", TerminalProgress::Unit::Bytes, quiet);
    run.progress = &progress;
    run.onNote = [quiet](const std::string& note) {
        if (!quiet)
            printMessage("merge", "note", note);
    };
    if (parser.isSet("save_intermediate"))
        run.beforePublish = [&](const std::string& dir, const std::vector<std::string>& files) {
            return writeMergeReport(dir, std::filesystem::absolute(target).lexically_normal().string(), outputs,
                                    files, setup.mappingRows);
        };
    auto outcome = outputs.empty() ? Result<MergeOutcome>(MergeOutcome {}) : mergeCheckpoints(outputs, target, run);
    const bool fusedWritten = outcome && !outputs.empty();
    if (outcome && separateAdapter) {
        MergeRunOptions adapterRun = run;
        adapterRun.beforePublish = nullptr; // the report goes with the fused model
        auto adapter = mergeCheckpoints({ *separateAdapter }, peftTarget, adapterRun);
        if (!adapter && adapter.error().isCanceled() && fusedWritten) {
            outcome = makeError("canceled while writing the adapter; the fused model is in " + target
                                + ", the adapter folder " + peftTarget + " was left as it was");
        } else if (!adapter) {
            outcome = adapter.error().withContext(outputs.empty() ? "the adapter"
                                                                  : "the fused model is in " + target
                                                                      + ", but the adapter could not be written");
        } else {
            for (const auto& f : adapter->files)
                outcome->files.push_back((std::filesystem::path(adapter->outputDir) / f).string());
            outcome->bytesWritten += adapter->bytesWritten;
            outcome->seconds += adapter->seconds;
            if (outputs.empty())
                outcome->outputDir = adapter->outputDir;
        }
    }
    progress.finish();
    setup.debug.stage("write");
    if (!outcome) {
        const bool canceled = outcome.error().isCanceled();
        return reportFailure(parser, canceled ? "canceled; nothing was written" : outcome.error().message);
    }
    for (const auto& w : outcome->warnings)
        printMessage("merge", "warning", w);
    std::size_t tensors = 0;
    std::vector<std::string> dropped;
    if (separateAdapter)
        outputs.push_back(*separateAdapter);
    for (const auto& o : outputs) {
        tensors += o.plan->tensors.size();
        dropped.insert(dropped.end(), o.plan->dropped.begin(), o.plan->dropped.end());
    }
    if (json) {
        nlohmann::json j { { "output_dir", outcome->outputDir }, { "files", outcome->files },
                           { "total_size", outcome->bytesWritten }, { "seconds", outcome->seconds },
                           { "tensors", tensors }, { "dropped", dropped },
                           { "warnings", outcome->warnings }, { "notes", outcome->notes } };
        if (planned->lora) {
            j["lora_fused"] = planned->lora->fused ? planned->lora->fused->fusedTensors : 0;
            j["lora_adapter"] = planned->lora->adapter ? planned->lora->adapterFolder : "";
            j["lora_notes"] = planned->lora->notes;
        }
        std::cout << jsonText(j) << "\n";
    } else if (!parser.isSet("quiet")) {
        const double rate = outcome->seconds > 0 ? static_cast<double>(outcome->bytesWritten) / outcome->seconds : 0;
        std::cout << "Merged " << tensors << " tensors (" << formatBytes(outcome->bytesWritten) << ") into "
                  << printableText(outcome->outputDir) << " in " << std::fixed
                  << std::setprecision(outcome->seconds < 10 ? 2 : 1)
                  << outcome->seconds << " s ("
                  << formatBytes(static_cast<std::uint64_t>(rate)) << "/s)\n";
        if (planned->lora && planned->lora->fused)
            std::cout << "  " << planned->lora->fused->fusedTensors << " weights fused with their LoRA update\n";
        for (const auto& f : outcome->files)
            std::cout << "  " << printableText(f) << "\n";
    }
    return ExitOk;
}

} // namespace tessera::cli
