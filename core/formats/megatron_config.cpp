// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/megatron_config.h"
#include "io/path_kinds.h"
#include "io/printable.h"
#include "io/text_file.h"
#include "text_util.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// The fields in the order messages list them, with their TransformerConfig and argparse names.
struct FieldSpec {
    MegatronSetting MegatronConfig::*member;
    const char* configKey;
    const char* argsKey;
};

const FieldSpec kFields[] = {
    { &MegatronConfig::tensorParallel, "tensor_model_parallel_size", "tensor_model_parallel_size" },
    { &MegatronConfig::pipelineParallel, "pipeline_model_parallel_size", "pipeline_model_parallel_size" },
    { &MegatronConfig::virtualPipeline, "virtual_pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size" },
    { &MegatronConfig::expertParallel, "expert_model_parallel_size", "expert_model_parallel_size" },
    { &MegatronConfig::expertTensorParallel, "expert_tensor_parallel_size", "expert_tensor_parallel_size" },
    { &MegatronConfig::numLayers, "num_layers", "num_layers" },
    { &MegatronConfig::firstStageLayers, "num_layers_in_first_pipeline_stage", "num_layers_in_first_pipeline_stage" },
    { &MegatronConfig::lastStageLayers, "num_layers_in_last_pipeline_stage", "num_layers_in_last_pipeline_stage" },
    { &MegatronConfig::numExperts, "num_moe_experts", "num_experts" },
    { &MegatronConfig::gatedLinearUnit, "gated_linear_unit", "swiglu" },
    { &MegatronConfig::hiddenSize, "hidden_size", "hidden_size" },
    { &MegatronConfig::ffnHiddenSize, "ffn_hidden_size", "ffn_hidden_size" },
    { &MegatronConfig::numAttentionHeads, "num_attention_heads", "num_attention_heads" },
    { &MegatronConfig::numQueryGroups, "num_query_groups", "num_query_groups" },
    { &MegatronConfig::kvChannels, "kv_channels", "kv_channels" },
};

/// A virtual pipeline size of 1 means the same as none; normalising keeps comparisons between sources honest.
void normalise(MegatronConfig& config)
{
    if (config.virtualPipeline && *config.virtualPipeline <= 1)
        config.virtualPipeline.value.reset();
}

/// Parallel sizes beyond a million ranks, or model sizes beyond 2^40, are damaged files; refusing them here keeps
/// every product and offset computed from them far inside 64 bits.
constexpr std::int64_t kMaxParallelSize = 1 << 20;
constexpr std::int64_t kMaxModelSize = std::int64_t(1) << 40;

bool isParallelSize(const MegatronSetting MegatronConfig::*member)
{
    return member == &MegatronConfig::tensorParallel || member == &MegatronConfig::pipelineParallel
        || member == &MegatronConfig::virtualPipeline || member == &MegatronConfig::expertParallel
        || member == &MegatronConfig::expertTensorParallel;
}

/// Empty when `value` is a sane value for the field, else why not.
std::string checkRange(const FieldSpec& field, std::int64_t value)
{
    const std::int64_t limit = isParallelSize(field.member) ? kMaxParallelSize : kMaxModelSize;
    if (value >= 0 && value <= limit)
        return {};
    return std::string(field.configKey) + " is " + std::to_string(value) + ", outside 0 to " + std::to_string(limit)
           + "; it is ignored";
}

std::int64_t orOne(const MegatronSetting& s) { return s && *s > 0 ? *s : 1; }

} // namespace

std::string MegatronSetting::describe(const std::string& key) const
{
    std::string out = key + " " + (value ? std::to_string(*value) : std::string("unknown"));
    if (!source.empty())
        out += " (" + source + ")";
    return out;
}

std::vector<std::string> MegatronConfig::mergeFrom(const MegatronConfig& other)
{
    std::vector<std::string> conflicts;
    for (const auto& field : kFields) {
        MegatronSetting& mine = this->*field.member;
        const MegatronSetting& theirs = other.*field.member;
        if (!theirs)
            continue;
        if (!mine)
            mine = theirs;
        else if (*mine != *theirs)
            conflicts.push_back(mine.describe(field.configKey) + " disagrees with " + theirs.describe(field.argsKey)
                                + "; using the first");
    }
    for (const auto& s : other.sources)
        sources.push_back(s);
    for (const auto& p : other.problems)
        conflicts.push_back(p);
    return conflicts;
}

std::string findTransformerConfig(const std::string& dir)
{
    fs::path here = absoluteNormal(dir);
    for (int up = 0; up < 3 && !here.empty(); ++up) {
        std::error_code ec;
        const fs::path candidate = here / "transformer_config.json";
        if (fs::is_regular_file(candidate, ec))
            return candidate.string();
        if (here == here.root_path())
            break;
        here = here.parent_path();
    }
    return {};
}

Result<MegatronConfig> readTransformerConfig(const std::string& path)
{
    const auto text = readTextFile(path);
    TESSERA_TRY(text);
    auto json = nlohmann::json::parse(*text, nullptr, false);
    if (json.is_discarded() || !json.is_object())
        return makeError(path + ": not a JSON object; the parallel sizes cannot be read from it");
    MegatronConfig config;
    const std::string source = fs::path(path).filename().string();
    for (const auto& field : kFields) {
        auto it = json.find(field.configKey);
        if (it == json.end())
            continue;
        MegatronSetting& s = config.*field.member;
        if (it->is_boolean())
            s.value = it->get<bool>() ? 1 : 0;
        else if (it->is_number_unsigned() && it->get<std::uint64_t>() > std::uint64_t(kMaxModelSize))
            return makeError(path + ": '" + field.configKey + "' is " + it->dump() + ", far beyond any model");
        else if (it->is_number_integer())
            s.value = it->get<std::int64_t>();
        else if (!it->is_null())
            return makeError(path + ": '" + field.configKey + "' is "
                             + (it->is_primitive() ? printableText(it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) : "a " + std::string(it->type_name()))
                             + ", expected an integer or null");
        if (s) {
            if (const auto why = checkRange(field, *s); !why.empty())
                return makeError(path + ": " + why.substr(0, why.rfind(';')));
            s.source = source;
        }
    }
    config.sources.push_back(path);
    normalise(config);
    return config;
}

MegatronConfig megatronConfigFromArgs(const PyRef& args, const std::string& source)
{
    MegatronConfig config;
    if (!args || args->kind != PyValue::Kind::Object)
        return config;
    for (const auto& field : kFields) {
        PyRef value = args->attr(field.argsKey);
        // Older Megatron-LM named the uneven first/last stage sizes differently.
        if (!value && field.member == &MegatronConfig::firstStageLayers)
            value = args->attr("decoder_first_pipeline_num_layers");
        if (!value && field.member == &MegatronConfig::lastStageLayers)
            value = args->attr("decoder_last_pipeline_num_layers");
        if (!value)
            continue;
        MegatronSetting& s = config.*field.member;
        if (value->kind == PyValue::Kind::Bool)
            s.value = value->boolean ? 1 : 0;
        else if (value->isInt())
            s.value = value->integer;
        if (s) {
            if (auto why = checkRange(field, *s); !why.empty()) {
                config.problems.push_back(field.argsKey + why.substr(std::strlen(field.configKey)) + " (" + source + ")");
                s.value.reset();
                continue;
            }
            s.source = source;
        }
    }
    config.sources.push_back(source);
    normalise(config);
    return config;
}

std::optional<std::int64_t> megatronLayerOffset(const MegatronConfig& config, int pp, int vp)
{
    if (!config.numLayers)
        return std::nullopt;
    const std::int64_t layers = *config.numLayers;
    const std::int64_t stages = orOne(config.pipelineParallel);
    const std::int64_t virtualStages = orOne(config.virtualPipeline);
    if (stages <= 1 && virtualStages <= 1)
        return 0;
    const bool uneven = config.firstStageLayers || config.lastStageLayers;
    if (uneven && stages > 1) {
        const std::int64_t first = config.firstStageLayers ? *config.firstStageLayers : 0;
        const std::int64_t last = config.lastStageLayers ? *config.lastStageLayers : 0;
        const std::int64_t middleStages
            = stages - (config.firstStageLayers ? 1 : 0) - (config.lastStageLayers ? 1 : 0);
        const std::int64_t middleLayers = layers - first - last;
        // Stage 0 is a middle stage when the first stage size is not given.
        const std::int64_t middleRank = config.firstStageLayers ? pp - 1 : pp;
        if (virtualStages > 1) {
            const std::int64_t firstChunk = first / virtualStages;
            const std::int64_t middleChunk = middleLayers / virtualStages;
            const std::int64_t total = firstChunk + middleChunk + (last / virtualStages);
            const std::int64_t perMiddleStage = middleStages > 0 ? middleChunk / middleStages : 0;
            return vp * total + (pp == 0 ? 0 : firstChunk + middleRank * perMiddleStage);
        }
        const std::int64_t perMiddleStage = middleStages > 0 ? middleLayers / middleStages : 0;
        return pp == 0 ? 0 : middleRank * perMiddleStage + first;
    }
    const std::int64_t perStage = layers / stages;
    if (virtualStages > 1)
        return vp * (layers / virtualStages) + pp * (perStage / virtualStages);
    return pp * perStage;
}

std::optional<std::int64_t> megatronStageLayers(const MegatronConfig& config, int pp, int vp)
{
    auto begin = megatronLayerOffset(config, pp, vp);
    if (!begin)
        return std::nullopt;
    const int stages = static_cast<int>(orOne(config.pipelineParallel));
    const int virtualStages = static_cast<int>(orOne(config.virtualPipeline));
    // The next chunk in Megatron's order (virtual stage major, pipeline rank minor) starts where this one ends.
    std::optional<std::int64_t> end;
    if (pp + 1 < stages)
        end = megatronLayerOffset(config, pp + 1, vp);
    else if (vp + 1 < virtualStages)
        end = megatronLayerOffset(config, 0, vp + 1);
    else
        end = *config.numLayers;
    return *end - *begin;
}

std::optional<MegatronShapeMismatch> checkShapeAgainstConfig(const std::string& name, const Shape& shape,
                                                             std::size_t leadingAxes, const MegatronConfig& config)
{
    const std::string source = config.sources.empty() ? "the config"
                                                      : fs::path(config.sources.front()).filename().string();
    using Found = std::optional<MegatronShapeMismatch>;
    auto check = [&](std::size_t dim, std::int64_t expected, const std::string& why) -> Found {
        const std::size_t d = dim + leadingAxes;
        if (d >= shape.size() || shape[d] == expected)
            return std::nullopt;
        return MegatronShapeMismatch { d, "dim " + std::to_string(d) + " is " + std::to_string(shape[d]) + " but "
                                              + source + " gives " + why + " = " + std::to_string(expected) };
    };
    const bool dense = name.find("experts") == std::string::npos;
    const bool attention = config.numAttentionHeads && config.hiddenSize;
    std::int64_t heads = 0, groups = 0, headDim = 0;
    std::string headDimText;
    if (attention) {
        heads = *config.numAttentionHeads;
        groups = config.numQueryGroups ? *config.numQueryGroups : heads;
        headDim = config.kvChannels ? *config.kvChannels : (heads > 0 ? *config.hiddenSize / heads : 0);
        headDimText = config.kvChannels ? "kv_channels " + std::to_string(headDim)
                                        : "hidden_size/num_attention_heads " + std::to_string(headDim);
    }
    if (attention && endsWith(name, "self_attention.linear_qkv.weight")) {
        auto m = check(0, (heads + 2 * groups) * headDim,
                       "(num_attention_heads " + std::to_string(heads) + " + 2 × num_query_groups "
                           + std::to_string(groups) + ") × " + headDimText);
        return m ? m : check(1, *config.hiddenSize, "hidden_size");
    }
    if (attention && endsWith(name, "self_attention.linear_proj.weight")) {
        auto m = check(0, *config.hiddenSize, "hidden_size");
        return m ? m : check(1, heads * headDim, "num_attention_heads " + std::to_string(heads) + " × " + headDimText);
    }
    if (dense && config.ffnHiddenSize && config.gatedLinearUnit && endsWith(name, "mlp.linear_fc1.weight")) {
        const bool glu = *config.gatedLinearUnit != 0;
        return check(0, (glu ? 2 : 1) * *config.ffnHiddenSize,
                     glu ? "2 × ffn_hidden_size (gated_linear_unit)" : std::string("ffn_hidden_size"));
    }
    if (dense && config.ffnHiddenSize && endsWith(name, "mlp.linear_fc2.weight"))
        return check(1, *config.ffnHiddenSize, "ffn_hidden_size");
    // The output layer of a value model is [1, hidden]; its width still has to match.
    if (config.hiddenSize && (name == "embedding.word_embeddings.weight" || name == "output_layer.weight"))
        return check(1, *config.hiddenSize, "hidden_size");
    return std::nullopt;
}

MegatronConfig loadTransformerConfig(CheckpointInfo& info)
{
    const std::string jsonPath = findTransformerConfig(info.root);
    if (jsonPath.empty())
        return {};
    auto json = readTransformerConfig(jsonPath);
    if (!json) {
        info.problems.push_back({ jsonPath, "", json.error().message });
        return {};
    }
    info.notes["transformer_config"] = jsonPath;
    return std::move(*json);
}

} // namespace tessera
