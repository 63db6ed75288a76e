// SPDX-License-Identifier: GPL-3.0-or-later
// tessera inspect PATH [--json] [--tensors] [--norms] [--hf_model_path DIR]

#include "cli_args.h"
#include "commands.h"
#include "program.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "compare/training_norms.h"
#include "compare/training_report.h"
#include "io/regex.h"
#include "model/checkpoint_report.h"
#include "mapping/hf_parameter_check.h"
#include "mapping/lora.h"
#include "mapping/megatron_mapping.h"
#include "mapping/megatron_mapping_report.h"
#include "formats/run_steps.h"
#include "formats/scan.h"

#include <nlohmann/json.hpp>

#include <iostream>
#include <optional>

namespace tessera::cli {

namespace {

/// A verl FSDP folder's training state, and its optimizer norms when asked for (they read every moment tensor,
/// so only then).
struct TrainingReport {
    std::optional<TrainingState> state;
    std::optional<TrainingNorms> norms;
    bool problems() const { return state && !state->problems.empty(); }
};

Result<TrainingReport> readTrainingReport(const CheckpointInfo& info, bool norms, int threads, bool quiet)
{
    TrainingReport report;
    {
        TerminalProgress progress("Reading the training state", TerminalProgress::Unit::Items, quiet);
        auto state = readTrainingState(info, threads, progress);
        progress.finish();
        TESSERA_TRY(state);
        if (state->any())
            report.state = std::move(*state);
    }
    if (!norms)
        return report;
    if (!report.state || !report.state->hasOptimizer())
        return makeError(info.root + ": no optimizer state to read (--norms reads a verl FSDP folder's "
                                     "optim_world_size_W_rank_R.pt files)");
    TerminalProgress progress("Reading the optimizer state", TerminalProgress::Unit::Bytes, quiet);
    auto computed = computeTrainingNorms(*report.state, threads, progress);
    progress.finish();
    TESSERA_TRY(computed);
    report.norms = std::move(*computed);
    return report;
}

/// A run root shows its newest step (or the tracker's); the steps it saved are what `drift` compares. Empty for a
/// folder of one step.
std::vector<long long> otherSavedSteps(const std::string& path)
{
    std::vector<long long> list;
    if (auto steps = findRunSteps(path); steps && steps->size() > 1)
        for (const auto& s : *steps)
            list.push_back(s.step);
    return list;
}

std::string runStepsLine(const std::vector<long long>& steps, const std::string& path)
{
    if (steps.empty())
        return {};
    std::string list;
    for (long long step : steps)
        list += (list.empty() ? "" : ", ") + std::to_string(step);
    return "Run         " + std::to_string(steps.size()) + " saved steps (" + list + "): " + std::string(kProgram.name)
        + " drift " + printableMessage(path) + " shows how each tensor moved\n";
}

} // namespace

int runInspect(const std::vector<std::string>& args)
{
    ArgParser parser("inspect", "PATH [--json] [--tensors] [--norms] [--hf_model_path DIR]",
                     "Detect the layout of a checkpoint and describe it: parallel configuration, every tensor with\n"
                     "its dtype, global shape and the pieces each rank holds, and every problem found. Beside a verl\n"
                     "FSDP model it describes the training state a resume loads: optimizer, hyper-parameters, Adam\n"
                     "step, scheduler, RNG and dataloader state, and whether every rank has it. Reads only headers\n"
                     "and pickles, never tensor data (unless --norms).");
    parser.addPositional("PATH", "checkpoint folder (run root, global_step_N, actor/, DCP, Megatron, HF) or file");
    parser.addSwitch("json", "print one JSON object on stdout instead of the summary");
    parser.addSwitch("tensors", "list every tensor in the summary (and with --norms every parameter's norms)");
    parser.addSwitch("norms", "read the optimizer state and show each parameter's L2 norms of exp_avg and "
                              "sqrt(exp_avg_sq), which layers are still moving: the 10 largest and smallest "
                              "(all in --json)");
    parser.addOption("hf_model_path", "DIR", "folder with config.json and the tokenizer, if not found automatically");
    parser.addOption("threads", "N", "files read in parallel, 1 to " + std::to_string(kMaxThreads),
                     "number of cores");
    parser.addOption("param_mapping", "FILE", "Megatron: a mapping rules JSON file over the built-in rules");
    parser.addOption("ignore_missing_params", "REGEX",
                     "names that may be missing (or, for Megatron, unmapped): an RE2 regex found in the name");
    parser.addSwitch("is_value_model", "a value model: score.weight instead of lm_head.weight (Megatron: map "
                                       "output_layer to it)");
    parser.addSwitch("tie_word_embedding", "no lm_head.weight is expected, even if config.json does not tie it");
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    if (parser.isSet("ignore_missing_params"))
        if (auto re = Regex::compile(parser.value("ignore_missing_params"), "--ignore_missing_params"); !re)
            return reportFailure(parser, re.error().message, ExitUsage);
    const auto threads = threadsOption(parser);
    if (!threads)
        return reportFailure(parser, threads.error().message, ExitUsage);
    ScanOptions options;
    options.hfModelPath = parser.value("hf_model_path");
    options.threads = static_cast<int>(*threads);
    TerminalProgress progress("Scanning", TerminalProgress::Unit::Items, parser.isSet("json"));
    auto info = scanCheckpoint(parser.positional("PATH"), options, progress);
    progress.finish();
    if (!info)
        return reportFailure(parser, info.error().message);
    // Hugging Face names are checked against what config.json expects, as a merge checks them.
    ParameterCheckOptions check;
    check.ignoreMissing = parser.value("ignore_missing_params");
    if (parser.isSet("is_value_model"))
        check.valueModel = true;
    check.tieWordEmbeddings = parser.isSet("tie_word_embedding");
    if (const Status checked = checkExpectedParameters(*info, check); !checked)
        return reportFailure(parser, checked.error().message, ExitUsage);
    // Megatron checkpoints also show how their names map to Hugging Face's, and what does not fit.
    std::optional<Result<MappingResult>> mapping;
    if (isMegatronLayout(info->layout)) {
        MappingOptions mo;
        mo.configDir = options.hfModelPath;
        mo.userRulesFile = parser.value("param_mapping");
        mo.ignoreMissing = parser.value("ignore_missing_params");
        if (parser.isSet("is_value_model"))
            mo.valueModel = true;
        mo.tieWordEmbeddings = parser.isSet("tie_word_embedding");
        mapping = mapMegatronToHf(*info, mo);
    }
    const bool mappingOk = !mapping || (mapping->ok() && mapping->value().problems.empty());
    const auto training = readTrainingReport(*info, parser.isSet("norms"), options.threads, parser.isSet("json"));
    if (!training)
        return reportFailure(parser, training.error().message);
    const std::vector<long long> runSteps = otherSavedSteps(parser.positional("PATH"));
    if (parser.isSet("json")) {
        auto j = checkpointToJson(*info);
        if (!runSteps.empty())
            j["run_steps"] = runSteps;
        if (const auto lora = loraSummaryLines(mapping && mapping->ok() ? mapping->value().mapped : *info); !lora.empty())
            j["lora"] = lora;
        if (mapping)
            j["mapping"] = mapping->ok() ? mappingToJson(mapping->value())
                                         : nlohmann::json { { "error", mapping->error().message } };
        if (training->state)
            j["training_state"] = trainingStateToJson(*training->state, training->norms ? &*training->norms : nullptr);
        std::cout << jsonText(j) << "\n";
    } else {
        std::cout << checkpointSummary(*info, parser.isSet("tensors"));
        std::cout << runStepsLine(runSteps, parser.positional("PATH"));
        // A Megatron checkpoint's adapter shows under its mapped (PEFT) names.
        const auto lora = loraSummaryLines(mapping && mapping->ok() ? mapping->value().mapped : *info);
        for (std::size_t i = 0; i < lora.size(); ++i)
            std::cout << (i ? "            " : "LoRA        ") << printableMessage(lora[i]) << "\n";
        if (mapping && mapping->ok())
            std::cout << "\n" << mappingSummary(mapping->value(), parser.isSet("tensors"));
        else if (mapping)
            std::cout << "\nMapping     not possible: " << printableMessage(mapping->error().message) << "\n";
        if (training->state)
            std::cout << "\n" << trainingStateSummary(*training->state);
        if (training->norms)
            std::cout << "\n" << trainingNormsText(*training->norms, parser.isSet("tensors"));
    }
    return info->problems.empty() && mappingOk && !training->problems() ? ExitOk : ExitProblems;
}

} // namespace tessera::cli
