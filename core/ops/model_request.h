// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What `merge`, `test` and `split` share: the checkpoint they read and how it becomes a Hugging Face model (verl's
// model_merger flags). Every flag is kept as given, so a request is exactly a command line; settings() reads it
// the one way both the command line and the workbench read it.

#include "mapping/lora.h"
#include "mapping/megatron_mapping.h"
#include "mapping/hf_parameter_check.h"
#include "merge/lora_plan.h"
#include "model/dtype.h"
#include "ops/flag_table.h"
#include "result.h"

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tessera {

/// The flags naming the checkpoint and how it is read, mapped and converted.
struct ModelRequest {
    std::optional<std::string> localDir;     ///< --local_dir
    std::optional<std::string> backend;      ///< --backend (auto)
    std::optional<std::string> hfModelPath;  ///< --hf_model_path
    std::optional<std::string> dtype;        ///< --dtype (keep each tensor's)
    std::optional<std::string> threads;      ///< --threads (one per core)
    bool json = false;
    bool quiet = false;
    bool tieWordEmbedding = false;
    bool isValueModel = false;
    std::optional<std::string> paramMapping;        ///< --param_mapping FILE
    std::optional<std::string> ignoreMissingParams; ///< --ignore_missing_params REGEX
    bool strict = true;                             ///< --strict (default) / --no_strict / --strict False
    std::optional<std::string> lora;                ///< --lora (both)
    std::optional<std::string> loraAlpha;           ///< --lora_alpha
    bool useRslora = false;
    std::optional<std::string> baseModel;           ///< --base_model
    bool usePeft = false;
    bool debug = false;
    bool lowCpuMemUsage = false;       ///< accepted for verl's scripts
    bool trustRemoteCode = false;      ///< accepted for verl's scripts
    bool useCpuInitialization = false; ///< accepted for verl's scripts

    auto fields() const
    {
        return std::tie(localDir, backend, hfModelPath, dtype, threads, json, quiet, tieWordEmbedding, isValueModel,
                        paramMapping, ignoreMissingParams, strict, lora, loraAlpha, useRslora, baseModel, usePeft,
                        debug, lowCpuMemUsage, trustRemoteCode, useCpuInitialization);
    }
    /// Nothing but the result on stdout: --json or --quiet.
    bool silent() const { return json || quiet; }
    bool operator==(const ModelRequest& other) const { return fields() == other.fields(); }
    bool operator!=(const ModelRequest& other) const { return !(*this == other); }
};

/// Where a merge takes the model's weights from (--weights_from).
enum class WeightsSource {
    Model,     ///< the checkpoint's model keys
    Optimizer, ///< the fp32 master weights its optimizer keeps (Megatron torch_dist, canonical fp32_param)
};

/// The model flags read: every value checked and converted.
struct ModelSettings {
    std::string localDir;
    std::string backend = "auto";
    std::optional<DType> dtype;
    unsigned threads = 0;              ///< 0: one per core
    LoraOutput loraOutput = LoraOutput::Both;
    LoraSettings lora;
    ParameterCheckOptions check;       ///< what config.json expects, and what may be missing
    MappingOptions mapping;            ///< Megatron names (its userRulesFile is --param_mapping)
    WeightsSource weightsFrom = WeightsSource::Model; ///< merge's --weights_from; test and split read the model
};

/// --lora, --lora_alpha and --use_rslora read as merge, test and diff read them; the error names the flag.
struct LoraFlagValues {
    LoraOutput output = LoraOutput::Both;
    LoraSettings settings;
};
Result<LoraFlagValues> loraFlagValues(const std::optional<std::string>& lora, const std::optional<std::string>& alpha,
                                      bool useRslora);

/// The LoRA flags are for LoRA checkpoints: `flag`, the first one given (nullptr: none), refused for `checkpoint`
/// (read from `root`) when it holds no LoRA tensors. One message for merge, test and diff.
Status loraFlagsApply(const CheckpointInfo& checkpoint, const std::string& root, const char* flag);

/// --base_model's scan (of `path`) as the fused model reads it: a Megatron checkpoint refused, and without a config
/// folder of its own it takes the LoRA checkpoint's (`loraConfigDir`), as readLoraCheckpoint() does.
Result<CheckpointInfo> baseModelAsRead(const CheckpointInfo& scanned, const std::string& path,
                                       const std::string& loraConfigDir);

/// Checks the model flags in the order the command line always has (--local_dir, --backend, --dtype, --threads,
/// --ignore_missing_params, --lora, --lora_alpha) and converts them; the error is a usage error naming the flag.
Result<ModelSettings> modelSettings(const ModelRequest& request);

/// The flags of ModelRequest for a request type deriving from it, in --help order. `--strict` and `--no_strict`
/// are read and written by readStrict()/writeStrict().
template <typename Request>
std::vector<Flag<Request>> modelFlags();

/// --strict / --no_strict / --strict False from a parse.
bool readStrict(const ArgParser& parser);
/// Appends what `strict` says, when it is not the default.
void writeStrict(bool strict, std::vector<std::string>& args);

/// Shared by the templates below: the help texts of the model flags.
namespace model_flag_help {
std::string threads();
} // namespace model_flag_help

template <typename Request>
std::vector<Flag<Request>> modelFlags()
{
    using M = ModelRequest;
    return {
        option<Request>("local_dir", "DIR", "the checkpoint: verl actor/ folder, global_step_N, DCP folder, …", &M::localDir),
        option<Request>("backend", "NAME", "auto, fsdp, dcp or megatron: the layout expected in --local_dir", &M::backend,
                        "auto"),
        option<Request>("hf_model_path", "DIR", "folder with config.json and the tokenizer (default: found next to "
                                                "the checkpoint, e.g. actor/huggingface)", &M::hfModelPath),
        option<Request>("dtype", "TYPE", "bf16, fp16 or fp32: convert floating-point tensors (round to nearest even)",
                        &M::dtype, "keep the checkpoint's"),
        option<Request>("threads", "N", model_flag_help::threads(), &M::threads, "number of cores"),
        toggle<Request>("json", "print JSON on stdout", &M::json),
        toggle<Request>("quiet", "no progress bar and no summary", &M::quiet),
        toggle<Request>("tie_word_embedding", "treat lm_head.weight as tied to the embedding even if config.json does "
                                              "not", &M::tieWordEmbedding),
        toggle<Request>("is_value_model", "Megatron: write output_layer as score.weight (also detected from a [1, "
                                          "hidden] output_layer); FSDP: value heads always pass through", &M::isValueModel),
        option<Request>("param_mapping", "FILE", "Megatron: a mapping rules JSON file that adds to or overrides the "
                                                 "built-in rules (same schema as resources/mapping/*.json)", &M::paramMapping),
        option<Request>("ignore_missing_params", "REGEX", "parameters config.json expects (or, for Megatron, source "
                                                          "tensors) in which REGEX (RE2 syntax) is found may be missing "
                                                          "(or unmapped) without failing", &M::ignoreMissingParams),
        customSwitch<Request>("strict", "fail on any missing parameter (or, for Megatron, unmapped source tensor) (the "
                                        "default)"),
        customSwitch<Request>("no_strict", "write what there is and only warn about missing parameters (or, for "
                                           "Megatron, unmapped tensors)"),
        option<Request>("lora", "WHAT", "LoRA checkpoints: fused (the base model with W + B·A·alpha/r), adapter (a "
                                        "PEFT adapter folder in TARGET/lora_adapter) or both", &M::lora, "both"),
        option<Request>("lora_alpha", "A", "LoRA alpha, when the checkpoint does not record it (lora_train_meta.json)",
                        &M::loraAlpha),
        toggle<Request>("use_rslora", "LoRA: scale by alpha/sqrt(r) (rank-stabilised LoRA) instead of alpha/r",
                        &M::useRslora),
        option<Request>("base_model", "DIR", "LoRA: the base model (a Hugging Face folder, or an FSDP or DCP "
                                             "checkpoint) for an adapter-only (save_lora_only) checkpoint", &M::baseModel),
        toggle<Request>("use_peft", "LoRA: write the PEFT adapter too (the default for LoRA checkpoints; verl's flag)",
                        &M::usePeft),
        toggle<Request>("debug", "log every file read, mapping rule, tensor plan and stage timing on stderr", &M::debug),
        toggle<Request>("low_cpu_mem_usage", "accepted for compatibility (Tessera always streams: memory stays within "
                                             "about twice the largest tensor)", &M::lowCpuMemUsage),
        toggle<Request>("trust_remote_code", "accepted for compatibility with verl (no code is ever run)",
                        &M::trustRemoteCode),
        toggle<Request>("use_cpu_initialization", "accepted for compatibility with verl (has no effect)",
                        &M::useCpuInitialization),
    };
}

} // namespace tessera
