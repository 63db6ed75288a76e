// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/model_request.h"

#include "formats/layout_registry.h"
#include "io/regex.h"
#include "mapping/lora_config.h"
#include "ops/option_values.h"
#include "ops/vocabulary.h"

namespace tessera {

namespace model_flag_help {
std::string threads() { return "worker threads, 1 to " + std::to_string(kMaxThreads); }
} // namespace model_flag_help

bool readStrict(const ArgParser& parser) { return !parser.isSet("no_strict") && !parser.isTurnedOff("strict"); }

void writeStrict(bool strict, std::vector<std::string>& args)
{
    if (!strict)
        args.push_back("--no_strict");
}

Result<LoraFlagValues> loraFlagValues(const std::optional<std::string>& lora, const std::optional<std::string>& alpha,
                                      bool useRslora)
{
    LoraFlagValues values;
    auto output = loraOutputFromName(lora.value_or("both"));
    TESSERA_TRY(output);
    values.output = *output;
    if (alpha) {
        // One bound for the flag, the adapter's files and the workbench (mapping/lora_config.h).
        auto value = decimalValue("lora_alpha", *alpha, 0, kMaxLoraAlpha, true);
        TESSERA_TRY(value);
        values.settings.alpha = *value;
    }
    if (useRslora)
        values.settings.useRslora = true;
    return values;
}

Status loraFlagsApply(const CheckpointInfo& checkpoint, const std::string& root, const char* flag)
{
    if (!flag || hasLoraTensors(checkpoint))
        return Status::success();
    return makeError(std::string(flag) + " is for LoRA checkpoints, and " + root
                     + " holds no LoRA tensors (no lora_A/lora_B or adapter.linear_in/out names)");
}

Result<CheckpointInfo> baseModelAsRead(const CheckpointInfo& scanned, const std::string& path,
                                       const std::string& loraConfigDir)
{
    if (isMegatronLayout(scanned.layout))
        return makeError("--base_model: " + path + " is a Megatron checkpoint; merge it into a Hugging Face folder "
                                                   "first and give that folder");
    CheckpointInfo base = scanned;
    if (base.hfConfigDir.empty())
        base.hfConfigDir = loraConfigDir;
    return base;
}

Result<ModelSettings> modelSettings(const ModelRequest& request)
{
    ModelSettings s;
    s.localDir = request.localDir.value_or("");
    if (s.localDir.empty())
        return makeError("--local_dir is required");
    s.backend = request.backend.value_or("auto");
    if (!isBackendName(s.backend))
        return makeError("--backend must be " + backendNameList() + " (got '" + s.backend + "')");
    auto dtype = outputDtypeValue(request.dtype);
    TESSERA_TRY(dtype);
    s.dtype = *dtype;
    auto threads = threadsValue(request.threads);
    TESSERA_TRY(threads);
    s.threads = *threads;
    // Checked for every layout before any reading: a bad pattern is a usage error even where it is not used.
    if (request.ignoreMissingParams)
        if (auto re = Regex::compile(*request.ignoreMissingParams, "--ignore_missing_params"); !re)
            return re.error();
    auto lora = loraFlagValues(request.lora, request.loraAlpha, request.useRslora);
    TESSERA_TRY(lora);
    s.loraOutput = lora->output;
    s.lora = lora->settings;
    if (request.usePeft && s.loraOutput == LoraOutput::Fused)
        s.loraOutput = LoraOutput::Both; // verl's --use_peft asks for the adapter

    s.check.ignoreMissing = request.ignoreMissingParams.value_or("");
    s.check.strict = request.strict;
    if (request.isValueModel)
        s.check.valueModel = true;
    s.check.tieWordEmbeddings = request.tieWordEmbedding;
    s.mapping.configDir = request.hfModelPath.value_or("");
    s.mapping.userRulesFile = request.paramMapping.value_or("");
    s.mapping.ignoreMissing = s.check.ignoreMissing;
    s.mapping.strict = s.check.strict;
    s.mapping.valueModel = s.check.valueModel;
    s.mapping.tieWordEmbeddings = s.check.tieWordEmbeddings;
    return s;
}

} // namespace tessera
