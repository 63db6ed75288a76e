// SPDX-License-Identifier: GPL-3.0-or-later
// `tessera split`: a Hugging Face model, or any checkpoint Tessera reads, written as a distributed checkpoint.

#include "commands.h"
#include "merge_common.h"
#include "merge_parts_cli.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "io/byte_size.h"
#include "formats/layout_registry.h"
#include "io/printable.h"
#include "publish/staged_run.h"
#include "split/split_engine.h"
#include "split/split_plan.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>

namespace tessera::cli {

namespace {

/// The largest world size, parallel size or layer count the options take (the planner checks what fits the model).
constexpr std::uint64_t kMaxSplitSize = 1'000'000;

void printJson(const nlohmann::json& j) { std::cout << jsonText(j) << "\n"; }

int fail(const ArgParser& parser, int code, const std::string& message) { return reportFailure(parser, message, code); }

} // namespace

int runSplit(const std::vector<std::string>& args)
{
    ArgParser parser("split", "(--hf_dir DIR | --local_dir DIR) --target_dir DIR --format F [sizes] [options]",
                     "Write a Hugging Face model (--hf_dir: safetensors, single or sharded, any dtype) or reshard any\n"
                     "checkpoint Tessera reads (--local_dir: FSDP, DCP, Megatron in any layout, mapped to Hugging\n"
                     "Face names) as a distributed checkpoint, streaming tensor by tensor: no intermediate folder,\n"
                     "memory within about twice the largest tensor. Formats:\n"
                     "  fsdp  verl's FSDP2 actor folder: model_world_size_N_rank_R.pt holding DTensors as FSDP2's\n"
                     "        state_dict() and torch.save write them, fsdp_config.json and huggingface/ (config and\n"
                     "        tokenizer); a target named RUN/global_step_N/actor also updates\n"
                     "        RUN/latest_checkpointed_iteration.txt\n"
                     "  dcp   a PyTorch Distributed Checkpoint (.metadata + __R_0.distcp) with the model's keys,\n"
                     "        every tensor Shard(0) over the ranks, as torchtitan saves it\n"
                     "  megatron  verl's Megatron actor folder: model/mp_rank_XX[_YYY][_ZZZ]/model.pt (one state dict\n"
                     "        per virtual stage) with Megatron-core names, QKV fused per query group, [gate; up] fused,\n"
                     "        the vocabulary padded, layers numbered per stage, experts per EP rank;\n"
                     "        transformer_config.json and hf_config_and_tokenizer/\n"
                     "  megatron-dist  Megatron-core torch_dist in dist_ckpt/ (a DCP folder of tensors stacked on a\n"
                     "        layer axis, metadata.json, common.pt), transformer_config.json and huggingface/\n"
                     "The output appears atomically and never replaces files: on error or Ctrl-C nothing is left.\n"
                     "`tessera merge` turns the result back into the same Hugging Face model, bit for bit.");
    addCommonMergeOptions(parser);
    parser.addOption("hf_dir", "DIR", "the Hugging Face model to split (a folder of *.safetensors and config.json)");
    parser.addOption("target_dir", "DIR", "output folder (created; must not hold a checkpoint already)");
    parser.addOption("format", "F", "fsdp, dcp, megatron or megatron-dist", "fsdp");
    parser.addOption("world_size", "N", "number of ranks");
    parser.addOption("mesh", "SHAPE", "fsdp: the device mesh, e.g. 2x4 for HSDP (Replicate() over the first dims, "
                                      "Shard(0) over the last)", "N");
    parser.addOption("mesh_dim_names", "A,B", "fsdp: mesh dim names", "fsdp, or ddp,fsdp for a 2-D mesh");
    parser.addOption("tp", "T", "megatron: tensor-parallel size", "1");
    parser.addOption("pp", "P", "megatron: pipeline-parallel size", "1");
    parser.addOption("vpp", "V", "megatron: virtual pipeline stages per pipeline stage (interleaved)", "1");
    parser.addOption("ep", "E", "megatron: expert-parallel size (mixture-of-experts models)", "1");
    parser.addOption("num_layers_in_first_pipeline_stage", "N",
                     "megatron: uneven stages, N layers on the first pipeline stage (the others split the rest)");
    parser.addOption("num_layers_in_last_pipeline_stage", "N",
                     "megatron: uneven stages, N layers on the last pipeline stage");
    parser.addOption("make_vocab_size_divisible_by", "N", "megatron: the vocabulary is padded to a multiple of N × TP",
                     "128");
    parser.addOption("flavor", "F", "megatron: verl (model/mp_rank_*/model.pt lists) or megatron-lm "
                                    "(ITER/mp_rank_*/model_optim_rng.pt with args, and latest_checkpointed_iteration.txt)",
                     "verl");
    parser.addOption("iteration", "N", "megatron-lm: write iter_NNNNNNN (default: release)");
    parser.addSwitch("dry_run", "print the split plan (files, tensors, boxes, memory, disk) and write nothing");
    parser.addSwitch("tensors", "with --dry-run: list the tensors of the first file and the box each holds");
    addPartOptions(parser);
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    if (const auto exitCode = checkPartFlags(parser)) // --part K/N, --status TARGET
        return *exitCode;

    const bool fromHf = parser.isSet("hf_dir");
    if (fromHf == parser.isSet("local_dir"))
        return fail(parser, ExitUsage, "give either --hf_dir (a Hugging Face model) or --local_dir (a checkpoint)");
    if (fromHf)
        parser.assign("local_dir", parser.value("hf_dir"));
    const std::string target = parser.value("target_dir");
    if (target.empty())
        return fail(parser, ExitUsage, "--target_dir is required");
    auto format = splitFormatFromName(parser.value("format"));
    if (!format)
        return fail(parser, ExitUsage, format.error().message);
    SplitOptions options;
    options.format = *format;
    if (parser.isSet("world_size")) {
        const auto n = wholeNumberOption(parser, "world_size", 1, kMaxSplitSize);
        if (!n)
            return fail(parser, ExitUsage, n.error().message);
        options.worldSize = static_cast<int>(*n);
    }
    if (parser.isSet("mesh")) {
        auto mesh = parseMeshShape(parser.value("mesh"));
        if (!mesh)
            return fail(parser, ExitUsage, mesh.error().message);
        options.mesh = *mesh;
    }
    if (parser.isSet("mesh_dim_names"))
        options.meshDimNames = parseMeshDimNames(parser.value("mesh_dim_names"));
    for (auto [flag, field] : { std::pair { "tp", &options.tp }, { "pp", &options.pp }, { "vpp", &options.vpp },
                                { "ep", &options.ep }, { "make_vocab_size_divisible_by", &options.vocabDivisibleBy } }) {
        const auto n = wholeNumberOption(parser, flag, 1, kMaxSplitSize);
        if (!n)
            return fail(parser, ExitUsage, n.error().message);
        *field = static_cast<int>(*n);
    }
    for (auto [flag, field] : { std::pair { "num_layers_in_first_pipeline_stage", &options.firstStageLayers },
                                { "num_layers_in_last_pipeline_stage", &options.lastStageLayers } })
        if (parser.isSet(flag)) {
            const auto n = wholeNumberOption(parser, flag, 0, kMaxSplitSize);
            if (!n)
                return fail(parser, ExitUsage, n.error().message);
            *field = static_cast<std::int64_t>(*n);
        }
    const bool megatron = options.format == SplitFormat::Megatron || options.format == SplitFormat::MegatronDist;
    if (megatron && (parser.isSet("world_size") || parser.isSet("mesh")))
        return fail(parser, ExitUsage, "--format " + std::string(splitFormatName(options.format)) + " takes --tp, --pp, --vpp and --ep, not --world_size or --mesh");
    if (!megatron && (parser.isSet("tp") || parser.isSet("pp") || parser.isSet("vpp") || parser.isSet("ep")
                      || options.firstStageLayers || options.lastStageLayers))
        return fail(parser, ExitUsage, "--tp, --pp, --vpp, --ep and the pipeline stage sizes are for --format "
                                       "megatron and megatron-dist");
    if (!megatron && !parser.isSet("world_size") && !parser.isSet("mesh"))
        return fail(parser, ExitUsage, "give the number of ranks: --world_size N (or --mesh for --format fsdp)");
    options.userRulesFile = parser.value("param_mapping");
    const std::string flavor = parser.value("flavor");
    if (flavor != "verl" && flavor != "megatron-lm")
        return fail(parser, ExitUsage, "--flavor must be verl or megatron-lm (got '" + flavor + "')");
    options.megatronLm = flavor == "megatron-lm";
    if ((options.megatronLm || parser.isSet("iteration")) && options.format != SplitFormat::Megatron)
        return fail(parser, ExitUsage, "--flavor and --iteration are for --format megatron");
    if (parser.isSet("iteration")) {
        const auto n = wholeNumberOption(parser, "iteration", 0, 9'999'999);
        if (!n)
            return fail(parser, ExitUsage, n.error().message);
        options.iteration = static_cast<std::int64_t>(*n);
    }
    if (options.format != SplitFormat::Dcp)
        options.runIteration = verlRunIteration(target);

    auto setup = prepareMerge(parser, "split");
    if (setup.exitCode >= 0)
        return setup.exitCode;
    if (fromHf && !isHuggingFaceLayout(setup.info->layout))
        return fail(parser, ExitProblems, parser.value("hf_dir") + " is a " + setup.info->layout
                                              + " checkpoint, not a Hugging Face model: give it as --local_dir");
    if (setup.lora)
        setup.loraOutput = LoraOutput::Fused; // a LoRA checkpoint splits as its fused model
    auto planned = planSetup(setup);
    if (!planned)
        return fail(parser, ExitProblems, planned.error().message);
    const MergePlan& model = planned->primary();
    const CheckpointInfo& info = planned->primaryInfo(setup);
    options.moduleOrder = isHuggingFaceLayout(info.layout);
    auto plan = planSplit(model, options);
    if (!plan)
        return fail(parser, ExitProblems, plan.error().message);

    if (isPartRun(parser))
        return runSplitPartCommand(parser, info, model, *plan, target);
    const bool json = parser.isSet("json");
    const bool quiet = parser.isSet("quiet") || json;
    if (parser.isSet("dry_run")) {
        if (auto usable = checkSplitTarget(info, model, *plan, target); !usable)
            return fail(parser, ExitProblems, usable.error().message);
        if (auto free = StagedRun::checkFree(target); !free)
            return fail(parser, ExitProblems, free.error().message);
        if (json)
            printJson(splitPlanToJson(*plan, model));
        else
            std::cout << splitPlanSummary(*plan, model, parser.isSet("tensors"));
        return ExitOk;
    }
    if (!quiet) {
        for (const auto& w : model.warnings)
            printMessage("split", "warning", w);
        for (const auto& w : plan->warnings)
            printMessage("split", "note", w);
    }

    TerminalProgress progress("Splitting", TerminalProgress::Unit::Bytes, quiet);
    SplitRunOptions run;
    run.progress = &progress;
    run.onNote = [quiet](const std::string& note) {
        if (!quiet)
            printMessage("split", "note", note);
    };
    auto outcome = runSplit(info, model, *plan, target, run);
    progress.finish();
    setup.debug.stage("write");
    if (!outcome)
        return fail(parser, ExitProblems,
                    outcome.error().isCanceled() ? "canceled; nothing was written" : outcome.error().message);
    if (json) {
        printJson({ { "output_dir", outcome->outputDir }, { "format", splitFormatName(plan->format) },
                    { "layout", plan->layout }, { "files", outcome->files }, { "total_size", outcome->bytesWritten },
                    { "seconds", outcome->seconds }, { "notes", outcome->notes } });
    } else if (!parser.isSet("quiet")) {
        const double rate = outcome->seconds > 0 ? static_cast<double>(outcome->bytesWritten) / outcome->seconds : 0;
        std::cout << "Split " << model.tensors.size() << " tensors (" << formatBytes(outcome->bytesWritten) << ") into "
                  << printableText(outcome->outputDir) << " as " << plan->layout << " in " << std::fixed
                  << std::setprecision(outcome->seconds < 10 ? 2 : 1) << outcome->seconds << " s ("
                  << formatBytes(static_cast<std::uint64_t>(rate)) << "/s)\n";
        const std::size_t shown = std::min<std::size_t>(outcome->files.size(), 12);
        for (std::size_t i = 0; i < shown; ++i)
            std::cout << "  " << printableText(outcome->files[i]) << "\n";
        if (shown < outcome->files.size())
            std::cout << "  … and " << outcome->files.size() - shown << " more\n";
    }
    return ExitOk;
}

} // namespace tessera::cli
