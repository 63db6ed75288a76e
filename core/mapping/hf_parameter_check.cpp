// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/hf_parameter_check.h"

#include "mapping/hf_expected.h"
#include "mapping/lora.h"
#include "mapping/megatron_mapping.h"
#include "mapping/megatron_mapping_rules.h"
#include "io/regex.h"

#include <filesystem>
#include <set>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// The names the merged model would have: a LoRA checkpoint's base weights without PEFT's wrapping.
std::vector<std::string> modelNames(const CheckpointInfo& info)
{
    if (hasLoraTensors(info))
        return loraBaseWeightNames(info);
    std::vector<std::string> names;
    for (const auto& t : info.tensors)
        names.push_back(t.name);
    return names;
}

/// The rules' variables for this checkpoint: what config.json says, and what only the checkpoint can say.
ConfigVars checkpointOverrides(const HfModelConfig& config, const std::set<std::string>& names,
                               const ParameterCheckOptions& options)
{
    ConfigVars overrides;
    // A critic (verl's value model) has score.weight, one row per label, where a language model has lm_head; its
    // config.json may name the classification head, or keep the actor's architecture (verl saves either).
    bool classifier = false;
    for (const auto& a : config.architectures)
        for (const char* head : { "ForTokenClassification", "ForSequenceClassification" })
            classifier = classifier || a.find(head) != std::string::npos;
    const bool valueModel = options.valueModel.value_or(
        classifier || (names.count("score.weight") && !names.count("lm_head.weight")));
    overrides["value_model"] = valueModel ? 1 : 0;
    if (options.tieWordEmbeddings)
        overrides["tie_word_embeddings"] = 1;
    // Multi-token-prediction layers (DeepSeek-V3, GLM-4.5) are layers past num_hidden_layers; transformers does not
    // keep them, so they are expected only when the checkpoint has the first of them.
    bool mtp = false;
    if (auto it = config.values.find("num_hidden_layers"); it != config.values.end()) {
        const std::string first = "model.layers." + std::to_string(it->second) + ".";
        for (const auto& name : names)
            mtp = mtp || name.rfind(first, 0) == 0;
    }
    overrides["has_mtp"] = mtp ? 1 : 0;
    return overrides;
}

std::string missingText(const ExpectedParameter& p, const HfModelConfig& config, const std::string& family,
                        const ConfigVars& vars)
{
    if (p.name == "lm_head.weight" && vars.count("tie_word_embeddings") && vars.at("tie_word_embeddings") == 0)
        return "missing: " + config.path + " says tie_word_embeddings is false, so the output head must come from "
            "the checkpoint, and it is not there; if the model shares its embedding with the head, pass "
            "--tie-word-embedding (the merged config.json then says so)";
    return "missing: " + config.path + " describes a " + family + " model with this parameter " + p.shapeText
        + ", and the checkpoint holds no tensor of that name (was it saved without it, or is a file missing?); "
          "without it the merged model would not load as trained";
}

} // namespace

Status checkExpectedParameters(CheckpointInfo& info, const ParameterCheckOptions& options)
{
    std::optional<Regex> ignore;
    if (!options.ignoreMissing.empty()) {
        auto compiled = Regex::compile(options.ignoreMissing, "--ignore_missing_params");
        TESSERA_TRY(compiled);
        ignore = std::move(*compiled);
    }
    if (isMegatronLayout(info.layout) || info.notes.count("mapping_rules") || info.hfConfigDir.empty())
        return Status::success();
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(info.hfConfigDir) / "config.json", ec))
        return Status::success(); // no config: the merge says so, and there is nothing to check against
    const auto list = modelNames(info);
    if (list.empty())
        return Status::success(); // an adapter-only LoRA checkpoint: the base model is checked where it is read
    const std::set<std::string> names(list.begin(), list.end());
    auto notChecked = [&](const std::string& why) {
        info.warnings.push_back(why + "; the checkpoint was not checked for missing parameters");
        return Status::success();
    };

    auto config = readHfModelConfig(info.hfConfigDir);
    if (!config)
        return notChecked(config.error().message);
    auto rules = selectMappingRules(config->architectures, config->modelType);
    if (!rules)
        return notChecked(config->path + ": Tessera has no parameter list for this architecture ("
                          + (config->architectures.empty() ? "model_type '" + config->modelType + "'"
                                                           : config->architectures.front())
                          + ")");
    auto vars = resolveConfigVars(*config, *rules, checkpointOverrides(*config, names, options));
    if (!vars)
        return notChecked(vars.error().message);
    auto expected = expectedHfParameters(*rules, *vars);
    if (!expected)
        return notChecked(config->path + ": " + expected.error().message);

    // Names of another convention (a newer transformers' model.language_model.*, a custom model) share few names
    // with the list: they are not a model with every parameter missing.
    std::size_t known = 0;
    for (const auto& p : *expected)
        known += names.count(p.name);
    if (known * 2 < names.size())
        return notChecked("only " + std::to_string(known) + " of the checkpoint's " + std::to_string(names.size())
                          + " tensor names are the parameter names " + config->path + " gives a " + rules->family
                          + " model");
    for (const auto& p : *expected) {
        if (names.count(p.name) || (ignore && ignore->search(p.name)))
            continue;
        const std::string text = missingText(p, *config, rules->family, *vars);
        if (options.strict)
            info.problems.push_back({ info.root, p.name, text });
        else
            info.warnings.push_back(p.name + ": " + text);
    }
    return Status::success();
}

} // namespace tessera
