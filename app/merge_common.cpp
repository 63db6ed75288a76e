// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge_common.h"

#include "terminal_progress.h"
#include "terminal_text.h"

#include "io/regex.h"
#include "formats/layout_registry.h"
#include "mapping/hf_parameter_check.h"
#include "mapping/lora_config.h"
#include "mapping/megatron_mapping.h"
#include "parallel.h"
#include "formats/scan.h"

namespace tessera::cli {

void addCommonMergeOptions(ArgParser& parser)
{
    parser.addOption("local_dir", "DIR", "the checkpoint: verl actor/ folder, global_step_N, DCP folder, …");
    parser.addOption("backend", "NAME", "auto, fsdp, dcp or megatron: the layout expected in --local_dir", "auto");
    parser.addOption("hf_model_path", "DIR", "folder with config.json and the tokenizer (default: found next to "
                                             "the checkpoint, e.g. actor/huggingface)");
    parser.addOption("dtype", "TYPE", "bf16, fp16 or fp32: convert floating-point tensors (round to nearest even)",
                     "keep the checkpoint's");
    parser.addOption("threads", "N", "worker threads, 1 to " + std::to_string(kMaxThreads), "number of cores");
    parser.addSwitch("json", "print JSON on stdout");
    parser.addSwitch("quiet", "no progress bar and no summary");
    parser.addSwitch("tie_word_embedding", "treat lm_head.weight as tied to the embedding even if config.json does not");
    parser.addSwitch("is_value_model", "Megatron: write output_layer as score.weight (also detected from a [1, hidden] "
                                       "output_layer); FSDP: value heads always pass through");
    parser.addOption("param_mapping", "FILE", "Megatron: a mapping rules JSON file that adds to or overrides the "
                                              "built-in rules (same schema as resources/mapping/*.json)");
    parser.addOption("ignore_missing_params", "REGEX", "parameters config.json expects (or, for Megatron, source "
                                                       "tensors) in which REGEX (RE2 syntax) is found may be missing "
                                                       "(or unmapped) without failing");
    parser.addSwitch("strict", "fail on any missing parameter (or, for Megatron, unmapped source tensor) (the default)");
    parser.addSwitch("no_strict", "write what there is and only warn about missing parameters (or, for Megatron, "
                                  "unmapped tensors)");
    parser.addOption("lora", "WHAT", "LoRA checkpoints: fused (the base model with W + B·A·alpha/r), adapter (a PEFT "
                                     "adapter folder in TARGET/lora_adapter) or both", "both");
    parser.addOption("lora_alpha", "A", "LoRA alpha, when the checkpoint does not record it (lora_train_meta.json)");
    parser.addSwitch("use_rslora", "LoRA: scale by alpha/sqrt(r) (rank-stabilised LoRA) instead of alpha/r");
    parser.addOption("base_model", "DIR", "LoRA: the base model (a Hugging Face folder, or an FSDP or DCP "
                                          "checkpoint) for an adapter-only (save_lora_only) checkpoint");
    parser.addSwitch("use_peft", "LoRA: write the PEFT adapter too (the default for LoRA checkpoints; verl's flag)");
    parser.addSwitch("debug", "log every file read, mapping rule, tensor plan and stage timing on stderr");
    parser.addSwitch("low_cpu_mem_usage", "accepted for compatibility (Tessera always streams: memory stays within "
                                          "about twice the largest tensor)");
    parser.addSwitch("trust_remote_code", "accepted for compatibility with verl (no code is ever run)");
    parser.addSwitch("use_cpu_initialization", "accepted for compatibility with verl (has no effect)");
}

MergeSetup prepareMerge(const ArgParser& parser, const std::string& command)
{
    MergeSetup setup;
    setup.debug = DebugLog(parser.isSet("debug"));
    auto fail = [&](int code, const std::string& message) {
        setup.exitCode = reportFailure(parser, message, code);
        return setup;
    };
    const std::string localDir = parser.value("local_dir");
    if (localDir.empty())
        return fail(ExitUsage, "--local_dir is required");
    const std::string backend = parser.value("backend");
    if (backend != "auto" && backend != "fsdp" && backend != "dcp" && backend != "megatron")
        return fail(ExitUsage, "--backend must be auto, fsdp, dcp or megatron (got '" + backend + "')");
    if (parser.isSet("dtype")) {
        auto dtype = dtypeFromUserName(parser.value("dtype"));
        if (!dtype)
            return fail(ExitUsage, "--dtype must be bf16, fp16 or fp32 (got '" + parser.value("dtype") + "')");
        setup.options.dtype = *dtype;
    }
    const auto threads = threadsOption(parser);
    if (!threads)
        return fail(ExitUsage, threads.error().message);
    setup.threads = *threads;
    // Checked for every backend before any reading: a bad pattern is a usage error even where it is not used.
    if (parser.isSet("ignore_missing_params"))
        if (auto re = Regex::compile(parser.value("ignore_missing_params"), "--ignore_missing_params"); !re)
            return fail(ExitUsage, re.error().message);
    auto loraOutput = loraOutputFromName(parser.value("lora"));
    if (!loraOutput)
        return fail(ExitUsage, loraOutput.error().message);
    setup.loraOutput = *loraOutput;
    if (parser.isSet("use_peft") && setup.loraOutput == LoraOutput::Fused)
        setup.loraOutput = LoraOutput::Both; // verl's --use_peft asks for the adapter
    LoraSettings lora;
    if (parser.isSet("lora_alpha")) {
        // One bound for the flag, the adapter's files and the workbench (mapping/lora_config.h).
        const auto alpha = decimalOption(parser, "lora_alpha", 0, kMaxLoraAlpha, true);
        if (!alpha)
            return fail(ExitUsage, alpha.error().message);
        lora.alpha = *alpha;
    }
    if (parser.isSet("use_rslora"))
        lora.useRslora = true;
    setup.options.threads = resolveThreads(static_cast<int>(setup.threads));
    setup.options.forceTieWordEmbeddings = parser.isSet("tie_word_embedding");
    setup.options.hfConfigDir = parser.value("hf_model_path");

    ScanOptions scan;
    scan.hfModelPath = setup.options.hfConfigDir;
    scan.threads = static_cast<int>(setup.threads);
    TerminalProgress progress("Scanning", TerminalProgress::Unit::Items, parser.isSet("quiet") || parser.isSet("json"));
    auto info = scanCheckpoint(localDir, scan, progress);
    progress.finish();
    if (!info)
        return fail(ExitProblems, info.error().message);
    setup.debug.stage("scan");
    setup.debug.checkpoint(*info);
    const std::string& layout = info->layout;
    const bool matches = backend == "auto" || (backend == "fsdp" && layoutFamily(layout) == LayoutFamily::TorchSave)
        || (backend == "dcp" && layoutFamily(layout) == LayoutFamily::Dcp)
        || (backend == "megatron" && isMegatronLayout(layout));
    // The guides run `test --backend fsdp` on an already merged folder: comparing that needs no backend.
    const bool mergedFolderTest = command == "test" && isHuggingFaceLayout(layout);
    if (mergedFolderTest && backend != "auto" && !parser.isSet("quiet") && !parser.isSet("json"))
        printMessage("test", "note", localDir + " is already a Hugging Face model; it is compared as it is (--backend "
                                         + backend + " is not needed)");
    if (!matches && !mergedFolderTest)
        return fail(ExitProblems, "--backend " + backend + " was given but " + localDir + " is a " + layout
                                      + " checkpoint (use --backend auto)");
    const bool strict = !parser.isSet("no_strict") && !parser.isTurnedOff("strict");
    // Hugging Face names: every parameter config.json expects must be there (Megatron's mapping checks its own).
    ParameterCheckOptions check;
    check.ignoreMissing = parser.value("ignore_missing_params");
    check.strict = strict;
    if (parser.isSet("is_value_model"))
        check.valueModel = true;
    check.tieWordEmbeddings = parser.isSet("tie_word_embedding");
    if (const Status checked = checkExpectedParameters(*info, check); !checked)
        return fail(ExitUsage, checked.error().message);
    if (!parser.isSet("quiet") && !parser.isSet("json"))
        for (const auto& w : info->warnings)
            printMessage(command, "warning", w);
    if (isMegatronLayout(layout)) {
        // Megatron names and fused weights become Hugging Face ones; the result merges like any other checkpoint.
        MappingOptions mapping;
        mapping.configDir = setup.options.hfConfigDir;
        mapping.userRulesFile = parser.value("param_mapping");
        mapping.ignoreMissing = parser.value("ignore_missing_params");
        mapping.strict = strict;
        if (parser.isSet("is_value_model"))
            mapping.valueModel = true;
        mapping.tieWordEmbeddings = parser.isSet("tie_word_embedding");
        auto mapped = mapMegatronToHf(*info, mapping);
        if (!mapped)
            return fail(ExitProblems, mapped.error().message);
        setup.debug.stage("map");
        setup.debug.mapping(*mapped);
        setup.mappingRows = mapped->rows;
        if (!parser.isSet("quiet") && !parser.isSet("json"))
            for (const auto& w : mapped->warnings)
                printMessage(command, "warning", w);
        info = std::move(mapped->mapped);
    }
    if (hasLoraTensors(*info)) {
        std::optional<CheckpointInfo> base;
        if (parser.isSet("base_model")) {
            auto scanned = scanCheckpoint(parser.value("base_model"), ScanOptions { "", scan.threads });
            if (!scanned)
                return fail(ExitProblems, "--base_model: " + scanned.error().message);
            if (isMegatronLayout(scanned->layout))
                return fail(ExitProblems, "--base_model: " + parser.value("base_model") + " is a Megatron checkpoint; "
                                          "merge it into a Hugging Face folder first and give that folder");
            if (scanned->hfConfigDir.empty())
                scanned->hfConfigDir = info->hfConfigDir; // as the fused model takes it (readLoraCheckpoint)
            if (const Status checked = checkExpectedParameters(*scanned, check); !checked)
                return fail(ExitUsage, checked.error().message);
            if (!parser.isSet("quiet") && !parser.isSet("json"))
                for (const auto& w : scanned->warnings)
                    printMessage(command, "warning", "--base_model: " + w);
            base = std::move(*scanned);
        }
        auto read = readLoraCheckpoint(*info, lora, base ? &*base : nullptr);
        if (!read)
            return fail(ExitProblems, read.error().message);
        if (!parser.isSet("quiet") && !parser.isSet("json")) {
            printMessage(command, "note", read->summary);
            for (const auto& note : read->notes)
                printMessage(command, "note", note);
        }
        setup.lora = std::move(*read);
        setup.debug.line(setup.lora->summary);
    } else if (parser.isSet("base_model") || parser.isSet("lora_alpha") || parser.isSet("use_peft")) {
        const char* flag = parser.isSet("base_model") ? "--base_model" : parser.isSet("lora_alpha") ? "--lora_alpha" : "--use_peft";
        return fail(ExitUsage, std::string(flag) + " is for LoRA checkpoints, and " + localDir
                                   + " holds no LoRA tensors (no lora_A/lora_B or adapter.linear_in/out names)");
    }
    setup.info = std::move(*info);
    return setup;
}

std::vector<MergeOutput> PlannedMerge::outputs(const MergeSetup& setup) const
{
    if (plan)
        return { MergeOutput { &*setup.info, &*plan, "" } };
    return lora->outputs(*setup.lora);
}

Result<PlannedMerge> planSetup(MergeSetup& setup)
{
    PlannedMerge planned;
    if (setup.lora) {
        auto plans = planLoraMerge(*setup.lora, setup.options, setup.loraOutput);
        TESSERA_TRY(plans);
        planned.lora = std::move(*plans);
    } else {
        auto plan = planMerge(*setup.info, setup.options);
        TESSERA_TRY(plan);
        planned.plan = std::move(*plan);
    }
    setup.debug.stage("plan");
    if (setup.debug.enabled())
        for (const auto& o : planned.outputs(setup))
            setup.debug.plan(*o.plan, *o.info, o.subfolder);
    return planned;
}

} // namespace tessera::cli
