// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/megatron_mapping.h"
#include "io/printable.h"

#include "formats/megatron_names.h"
#include "io/regex.h"
#include "mapping/expert_stacks.h"
#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping_rules.h"
#include "model/tensor_reindex.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <unordered_map>

namespace tessera {

namespace {

/// A pattern such as `decoder.layers.{layer}.mlp.linear_fc1.weight` compiled to a regex.
struct Pattern {
    std::string text;
    Regex regex;
    std::vector<std::string> names; ///< placeholder per capture group
};

using Captures = std::map<std::string, std::string>;

Result<Pattern> compilePattern(const std::string& text, const std::string& where)
{
    static const std::string special = R"(\^$.|?*+()[]{})";
    std::vector<std::string> names;
    std::string re;
    for (std::size_t i = 0; i < text.size();) {
        if (text[i] == '{') {
            const auto close = text.find('}', i);
            if (close == std::string::npos)
                return makeError(where + ": '" + text + "' has an unclosed '{'");
            const std::string name = text.substr(i + 1, close - i - 1);
            if (name == "layer" || name == "expert" || name == "block")
                re += "(\\d+)";
            else if (name == "param")
                re += "([A-Za-z_].*)";
            else
                return makeError(where + ": '" + text + "' uses {" + name + "}; only {layer}, {expert}, {block} and {param} exist");
            names.push_back(name);
            i = close + 1;
            continue;
        }
        if (special.find(text[i]) != std::string::npos)
            re += '\\';
        re += text[i++];
    }
    auto compiled = Regex::compile(re, where + ": the pattern '" + text + "' as the regex");
    TESSERA_TRY(compiled);
    return Pattern { text, std::move(*compiled), std::move(names) };
}

std::optional<Captures> matchPattern(const Pattern& p, const std::string& name)
{
    std::vector<std::string> m;
    if (!p.regex.fullMatch(name, m))
        return std::nullopt;
    Captures c;
    for (std::size_t i = 0; i < p.names.size(); ++i) {
        auto [it, inserted] = c.emplace(p.names[i], m[i]);
        if (!inserted && it->second != m[i])
            return std::nullopt; // the same placeholder twice must capture the same text
    }
    return c;
}

std::string render(std::string text, const Captures& captures)
{
    for (const auto& [name, value] : captures) {
        const std::string key = "{" + name + "}";
        for (std::size_t at; (at = text.find(key)) != std::string::npos;)
            text.replace(at, key.size(), value);
    }
    return text;
}

struct CompiledRule {
    const MappingRule* rule;
    std::vector<Pattern> megatron;
    std::vector<Pattern> hf; ///< the targets as patterns, to say which source a missing parameter needs
    std::int64_t layerOffset = 0; ///< added to {layer} between the Megatron name and the target
    std::int64_t experts = 0;     ///< stack_experts: the entries of the target's expert axis
};

/// `captures` with its {layer} moved by `offset` (a multi-token-prediction layer's number after the decoder's).
Captures offsetLayer(Captures captures, std::int64_t offset)
{
    auto it = captures.find("layer");
    std::int64_t layer = 0;
    // The pattern captured digits; a number too long for 64 bits (a damaged name) is left as it is.
    if (offset != 0 && it != captures.end()) {
        const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), layer);
        if (ec == std::errc() && end == it->second.data() + it->second.size() && layer <= kMaxMegatronIndex)
            it->second = std::to_string(layer + offset);
    }
    return captures;
}

Result<std::vector<CompiledRule>> compileRules(const std::vector<MappingRule>& rules, const ConfigVars& vars,
                                               const std::map<std::string, std::string>& ranges = {})
{
    std::vector<CompiledRule> out;
    for (const auto& rule : rules) {
        if (!rule.when.empty()) {
            auto on = evaluateExpression(rule.when, vars);
            if (!on)
                return on.error().withContext(rule.origin + ": rule '" + rule.id + "'");
            if (!*on)
                continue;
        }
        CompiledRule c { &rule, {}, {}, 0, 0 };
        if (rule.transform == MappingTransform::StackExperts) {
            auto range = ranges.find("expert");
            if (range == ranges.end())
                return makeError(rule.origin + ": rule '" + rule.id + "': stack_experts needs the family's \"expert\" range "
                                 "(the number of experts)");
            auto experts = evaluateExpression(range->second, vars);
            if (!experts)
                return experts.error().withContext(rule.origin + ": rule '" + rule.id + "': the number of experts");
            if (*experts <= 0 || *experts > kMaxMegatronIndex)
                return makeError(rule.origin + ": rule '" + rule.id + "': " + range->second + " is "
                                 + std::to_string(*experts) + ", not an expert count of a real model");
            c.experts = *experts;
        }
        if (!rule.layerOffset.empty()) {
            auto offset = evaluateExpression(rule.layerOffset, vars);
            if (!offset)
                return offset.error().withContext(rule.origin + ": rule '" + rule.id + "': layer_offset");
            if (*offset < -kMaxMegatronIndex || *offset > kMaxMegatronIndex)
                return makeError(rule.origin + ": rule '" + rule.id + "': layer_offset " + rule.layerOffset + " is "
                                 + std::to_string(*offset) + ", not a layer count of a real model");
            c.layerOffset = *offset;
        }
        for (const auto& m : rule.megatron) {
            auto p = compilePattern(m, rule.origin + ": rule '" + rule.id + "'");
            TESSERA_TRY(p);
            c.megatron.push_back(std::move(*p));
        }
        for (const auto& h : rule.hf) {
            auto p = compilePattern(h, rule.origin + ": rule '" + rule.id + "'");
            TESSERA_TRY(p);
            c.hf.push_back(std::move(*p));
        }
        out.push_back(std::move(c));
    }
    return out;
}

/// A source tensor after unstacking: what the rules see.
struct Item {
    std::string name;          ///< Megatron per-layer name the rules match
    TensorInfo tensor;
    std::string label;         ///< "decoder.layers.mlp.linear_fc1.weight[2]"
    Shape sourceShape;
    std::string chain;         ///< "unstack_layers" or empty
};

/// torch_dist's stacked tensors become one item per layer (and expert); a renamed tensor (an MTP layer) is
/// unstacked under its new name; everything else passes through.
std::vector<Item> unstack(const TensorInfo& t, const std::vector<CompiledRule>& rules, bool mayRename = true)
{
    for (const auto& r : rules)
        for (const auto& p : r.megatron) {
            auto captures = matchPattern(p, t.name);
            if (!captures)
                continue;
            const MappingTransform transform = r.rule->transform;
            if (transform == MappingTransform::Rename) {
                if (!mayRename)
                    continue;
                TensorInfo renamed = t;
                renamed.name = render(r.rule->hf.front(), offsetLayer(*captures, r.layerOffset));
                std::vector<Item> items = unstack(renamed, rules, false);
                for (Item& item : items) {
                    item.label.replace(0, renamed.name.size(), t.name);
                    item.chain = std::string("rename") + (item.chain.empty() ? "" : " + " + item.chain);
                }
                return items;
            }
            const std::size_t axes = transform == MappingTransform::UnstackLayersExperts ? 2 : 1;
            if (t.shape.size() < axes)
                break; // cannot be stacked: let the rules report it as it is
            // Neither are axes past any real model's layer or expert count (a damaged .metadata can claim 2⁶²):
            // unstacking makes one item per entry.
            if (t.shape[0] > kMaxMegatronIndex || (axes == 2 && t.shape[1] > kMaxMegatronIndex / std::max<std::int64_t>(t.shape[0], 1)))
                break;
            std::vector<Item> items;
            auto add = [&](TensorInfo tensor, Captures c, const std::string& index) {
                Item item;
                item.name = render(r.rule->hf.front(), c);
                tensor.name = item.name;
                item.tensor = std::move(tensor);
                item.label = t.name + "[" + index + "]";
                item.sourceShape = t.shape;
                item.chain = mappingTransformName(transform);
                items.push_back(std::move(item));
            };
            for (std::int64_t i = 0; i < t.shape[0]; ++i) {
                TensorInfo sub = selectLeading(t, i, t.name);
                Captures c = *captures;
                if (transform == MappingTransform::UnstackExperts) {
                    c["expert"] = std::to_string(i);
                    add(std::move(sub), c, std::to_string(i));
                    continue;
                }
                c["layer"] = std::to_string(i);
                if (transform == MappingTransform::UnstackLayers) {
                    add(std::move(sub), c, std::to_string(i));
                    continue;
                }
                for (std::int64_t e = 0; e < (sub.shape.empty() ? 0 : sub.shape[0]); ++e) {
                    c["expert"] = std::to_string(e);
                    add(selectLeading(sub, e, t.name), c, std::to_string(i) + ", " + std::to_string(e));
                }
            }
            return items;
        }
    return { Item { t.name, t, t.name, t.shape, {} } };
}

/// `tensor` renamed, with pieces from `slices` of dim 0: (source begin, length, destination begin).
TensorInfo rowSlices(const TensorInfo& tensor, const std::string& name, std::int64_t rows,
                     const std::vector<std::array<std::int64_t, 3>>& slices, const std::string& how)
{
    TensorInfo out;
    out.name = name;
    out.dtype = tensor.dtype;
    out.shape = tensor.shape;
    out.shape[0] = rows;
    out.placement = how;
    for (const auto& s : slices)
        for (auto& p : slicePieces(tensor, 0, s[0], s[1], s[2]))
            out.pieces.push_back(std::move(p));
    return out;
}

/// When one dim is a whole multiple off, the tensor-parallel size is the usual suspect.
std::string tpHint(std::int64_t actual, std::int64_t expected, const CheckpointInfo& source)
{
    if (actual <= 0 || expected <= 0 || actual == expected)
        return {};
    const bool smaller = actual < expected;
    const std::int64_t big = smaller ? expected : actual, small = smaller ? actual : expected;
    if (big % small != 0)
        return {};
    const std::string tp = source.parallel.tensorParallel > 0 ? std::to_string(source.parallel.tensorParallel) : "unknown";
    return "; " + std::to_string(actual) + " is " + (smaller ? "1/" : "") + std::to_string(big / small) + (smaller ? "" : "×")
           + " of " + std::to_string(expected) + ", as a wrong tensor-parallel size would give (the checkpoint says TP "
           + tp + "; check tensor_model_parallel_size and the mp_rank_* folders)";
}

struct Output {
    std::string name;
    TensorInfo tensor;
    std::int64_t stackEntry = -1; ///< stack_experts: the entry of the target's expert axis it fills
};

/// Applies a rule's transform; an error message when it cannot apply to this tensor.
Result<std::vector<Output>> applyTransform(const CompiledRule& rule, const Item& item, const Captures& captures,
                                           const ConfigVars& vars, const CheckpointInfo& source,
                                           std::vector<std::string>& warnings)
{
    const TensorInfo& t = item.tensor;
    std::vector<std::string> names;
    for (const auto& h : rule.rule->hf)
        names.push_back(render(h, captures));
    auto var = [&](const char* name) -> std::optional<std::int64_t> {
        auto it = vars.find(name);
        return it == vars.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
    };
    const std::int64_t rows = t.shape.empty() ? 0 : t.shape[0];
    std::vector<Output> out;
    switch (rule.rule->transform) {
    case MappingTransform::Copy: {
        TensorInfo copy = t;
        copy.name = names[0];
        out.push_back({ names[0], std::move(copy) });
        break;
    }
    case MappingTransform::TrimVocab: {
        const auto vocab = var("vocab_size");
        if (!vocab)
            return makeError("config.json has no vocab_size, so the vocabulary padding cannot be trimmed");
        if (t.shape.empty() || rows < *vocab)
            return makeError("has " + std::to_string(rows) + " rows, fewer than config.json's vocab_size "
                             + std::to_string(*vocab) + tpHint(rows, *vocab, source));
        if (rows > *vocab)
            warnings.push_back(printableText(t.name) + ": " + std::to_string(rows - *vocab)
                               + " rows of vocabulary padding dropped ("
                               + std::to_string(rows) + " → vocab_size " + std::to_string(*vocab) + ")");
        out.push_back({ names[0], rowSlices(t, names[0], *vocab, { { 0, *vocab, 0 } },
                                            rows > *vocab ? "rows [0, " + std::to_string(*vocab) + ") of " + item.label
                                                          : item.label) });
        break;
    }
    case MappingTransform::SplitGateUp: {
        if (t.shape.empty() || rows % 2 != 0)
            return makeError("a gated linear_fc1 needs an even number of rows ([gate; up]); it has shape "
                             + shapeToString(t.shape));
        const std::int64_t half = rows / 2;
        out.push_back({ names[0], rowSlices(t, names[0], half, { { 0, half, 0 } }, "first half (gate) of " + item.label) });
        out.push_back({ names[1], rowSlices(t, names[1], half, { { half, half, 0 } }, "second half (up) of " + item.label) });
        break;
    }
    case MappingTransform::SplitQkv: {
        const auto nh = var("num_attention_heads"), ng = var("num_key_value_heads"), hd = var("head_dim");
        if (!nh || !ng || !hd)
            return makeError("splitting the fused QKV needs num_attention_heads, num_key_value_heads and head_dim "
                             "in config.json");
        if (*ng <= 0 || *nh <= 0 || *hd <= 0 || *nh % *ng != 0)
            return makeError("config.json gives num_attention_heads " + std::to_string(*nh) + " and num_key_value_heads "
                             + std::to_string(*ng) + "; the heads must split evenly into the key/value groups");
        const std::int64_t qpg = *nh / *ng;
        const std::int64_t expected = (*nh + 2 * *ng) * *hd;
        if (t.shape.empty() || rows != expected)
            return makeError("has " + std::to_string(rows) + " rows but config.json gives (num_attention_heads "
                             + std::to_string(*nh) + " + 2 × num_key_value_heads " + std::to_string(*ng)
                             + ") × head_dim " + std::to_string(*hd) + " = " + std::to_string(expected)
                             + "; check those three values" + tpHint(rows, expected, source));
        std::vector<std::array<std::int64_t, 3>> q, k, v;
        for (std::int64_t g = 0; g < *ng; ++g) {
            const std::int64_t base = g * (qpg + 2) * *hd;
            q.push_back({ base, qpg * *hd, g * qpg * *hd });
            k.push_back({ base + qpg * *hd, *hd, g * *hd });
            v.push_back({ base + (qpg + 1) * *hd, *hd, g * *hd });
        }
        const std::string groups = " of each of the " + std::to_string(*ng) + " query groups of " + item.label;
        out.push_back({ names[0], rowSlices(t, names[0], *nh * *hd, q, "query rows" + groups) });
        out.push_back({ names[1], rowSlices(t, names[1], *ng * *hd, k, "key rows" + groups) });
        out.push_back({ names[2], rowSlices(t, names[2], *ng * *hd, v, "value rows" + groups) });
        break;
    }
    case MappingTransform::FuseQkvHeads: {
        auto heads = evaluateExpression(rule.rule->heads, vars);
        if (!heads)
            return heads.error().withContext("the number of heads of rule " + rule.rule->id);
        if (*heads <= 0 || t.shape.empty() || rows % (3 * *heads) != 0)
            return makeError("has " + std::to_string(rows) + " rows, which " + std::to_string(*heads)
                             + " heads (" + rule.rule->heads + ") of [q; k; v] do not divide" + tpHint(rows, 3 * *heads, source));
        // Head h is rows [3hd, 3hd + 3d) = [q_h; k_h; v_h]; Hugging Face keeps all queries, then keys, then values.
        const std::int64_t d = rows / (3 * *heads), width = *heads * d;
        std::vector<std::array<std::int64_t, 3>> slices;
        for (std::int64_t part = 0; part < 3; ++part)
            for (std::int64_t h = 0; h < *heads; ++h)
                slices.push_back({ h * 3 * d + part * d, d, part * width + h * d });
        out.push_back({ names[0], rowSlices(t, names[0], rows, slices,
                                            "q, k and v of each of the " + std::to_string(*heads) + " heads of " + item.label) });
        break;
    }
    case MappingTransform::StackExperts: {
        std::int64_t expert = -1;
        const std::string& digits = captures.at("expert");
        std::from_chars(digits.data(), digits.data() + digits.size(), expert); // too long: stays -1, refused below
        auto stacked = stackExpert(t, expert, rule.experts, *rule.rule, names[0]);
        TESSERA_TRY(stacked);
        stacked->placement = "expert " + digits + " of " + std::to_string(rule.experts) + " ("
            + mappingTransformText(*rule.rule) + ") from " + item.label;
        out.push_back({ names[0], std::move(*stacked), expert });
        break;
    }
    case MappingTransform::UnstackLayers:
    case MappingTransform::UnstackExperts:
    case MappingTransform::UnstackLayersExperts:
    case MappingTransform::Rename:
        return makeError("unstack transforms belong in \"unstack\", not in \"rules\"");
    }
    return out;
}

/// PEFT's name of a LoRA factor of the Hugging Face weight `weight` ("….q_proj.weight" → "base_model.model.…
/// q_proj.lora_B.weight"), the form the LoRA reader and adapter_model.safetensors use.
std::string peftFactorName(const std::string& weight, bool isA)
{
    const std::string module = weight.size() > 7 && weight.compare(weight.size() - 7, 7, ".weight") == 0
        ? weight.substr(0, weight.size() - 7)
        : weight;
    return "base_model.model." + module + (isA ? ".lora_A.weight" : ".lora_B.weight");
}

/// A Megatron LoRA factor under Hugging Face's PEFT names. B's rows are laid out like the adapted weight's
/// (a ColumnParallelLinear over the same outputs), so the weight's rule re-indexes it the same way (QKV per query
/// group, [gate; up] halves); A multiplies the input of every output the weight is split into, so each target
/// gets the same A (q, k and v share one; so do gate and up).
Result<std::vector<Output>> mapLoraFactor(const CompiledRule& rule, const Item& item, const MegatronAdapterName& adapter,
                                          const Captures& captures, const ConfigVars& vars, const CheckpointInfo& source,
                                          std::vector<std::string>& warnings)
{
    std::vector<Output> out;
    if (item.tensor.shape.size() != 2)
        return makeError("is not a 2-D LoRA factor");
    if (adapter.isA) {
        for (const auto& h : rule.rule->hf) {
            const std::string name = peftFactorName(render(h, captures), true);
            TensorInfo copy = item.tensor;
            copy.name = name;
            out.push_back({ name, std::move(copy) });
        }
        return out;
    }
    if (rule.rule->transform == MappingTransform::TrimVocab)
        return makeError("is a LoRA factor of a vocabulary-padded weight, which is not supported");
    if (rule.rule->transform == MappingTransform::StackExperts)
        return makeError("is a LoRA factor of an expert weight Hugging Face keeps stacked, which PEFT cannot name");
    Item weightLike = item;
    weightLike.name = adapter.weight;
    auto outputs = applyTransform(rule, weightLike, captures, vars, source, warnings);
    TESSERA_TRY(outputs);
    for (auto& o : *outputs) {
        o.name = peftFactorName(o.name, false);
        o.tensor.name = o.name;
        out.push_back(std::move(o));
    }
    return out;
}

/// True when a source tensor matches a rule (or rename) that moves its layer number: a layer past the decoder's.
Result<bool> sourceHasOffsetLayers(const CheckpointInfo& source, const MappingRuleSet& set)
{
    std::vector<Pattern> patterns;
    for (const auto* list : { &set.unstack, &set.rules })
        for (const auto& rule : *list)
            if (!rule.layerOffset.empty())
                for (const auto& m : rule.megatron) {
                    auto p = compilePattern(m, rule.origin + ": rule '" + rule.id + "'");
                    TESSERA_TRY(p);
                    patterns.push_back(std::move(*p));
                }
    for (const TensorInfo& t : source.tensors)
        for (const auto& p : patterns)
            if (matchPattern(p, t.name))
                return true;
    return false;
}

} // namespace

const char* mappingStatusName(MappingStatus status)
{
    switch (status) {
    case MappingStatus::Ok:
        return "ok";
    case MappingStatus::Unmapped:
        return "unmapped";
    case MappingStatus::Missing:
        return "missing";
    case MappingStatus::ShapeMismatch:
        return "shape mismatch";
    case MappingStatus::Ignored:
        return "ignored";
    case MappingStatus::Duplicate:
        return "duplicate";
    case MappingStatus::Unexpected:
        return "unexpected";
    case MappingStatus::Tied:
        return "tied";
    }
    return "?";
}

std::size_t MappingResult::count(MappingStatus status) const
{
    return static_cast<std::size_t>(
        std::count_if(rows.begin(), rows.end(), [&](const MappingRow& r) { return r.status == status; }));
}

Result<MappingResult> mapMegatronToHf(const CheckpointInfo& source, const MappingOptions& options)
{
    MappingResult result;
    const std::string configDir = options.configDir.empty() ? source.hfConfigDir : options.configDir;
    auto config = readHfModelConfig(configDir);
    TESSERA_TRY(config);
    result.configPath = config->path;
    auto rules = selectMappingRules(config->architectures, config->modelType);
    if (!rules && options.userRulesFile.empty() && !options.userRulesText)
        return rules.error().withContext(config->path);
    MappingRuleSet set = rules ? std::move(*rules) : MappingRuleSet {};
    if (!options.userRulesFile.empty() || options.userRulesText) {
        auto user = applyUserMappingRules(set, options.userRulesFile, options.userRulesText);
        TESSERA_TRY(user);
        set = std::move(*user);
    }
    result.family = set.family;
    result.ruleSources = set.sources;
    // --ignore_missing_params is searched for anywhere in a name (anchor it with ^…$ to match whole names).
    std::optional<Regex> ignore;
    if (!options.ignoreMissing.empty()) {
        auto compiled = Regex::compile(options.ignoreMissing, "--ignore_missing_params");
        TESSERA_TRY(compiled);
        ignore = std::move(*compiled);
    }
    auto ignored = [&](const std::string& name) { return ignore && ignore->search(name); };

    // The head: a value model's output_layer has one row (LinearForLastLayer), whatever the vocabulary.
    ConfigVars overrides;
    bool valueModel = options.valueModel.value_or(false);
    if (!options.valueModel)
        if (const TensorInfo* head = source.find("output_layer.weight"))
            valueModel = head->shape.size() == 2 && head->shape[0] == 1
                && config->values.count("vocab_size") && config->values.at("vocab_size") != 1;
    overrides["value_model"] = valueModel ? 1 : 0;
    if (options.tieWordEmbeddings)
        overrides["tie_word_embeddings"] = 1;
    // Layers past the decoder's (multi-token prediction: the rules that carry a layer_offset) are expected only
    // when the checkpoint has them: most runs train without MTP under a config.json that describes it.
    auto hasMtp = sourceHasOffsetLayers(source, set);
    TESSERA_TRY(hasMtp);
    overrides["has_mtp"] = *hasMtp ? 1 : 0;
    auto vars = resolveConfigVars(*config, set, overrides);
    TESSERA_TRY(vars);
    if (!*hasMtp && vars->count("num_nextn_predict_layers") && vars->at("num_nextn_predict_layers") > 0)
        result.warnings.push_back("config.json gives num_nextn_predict_layers "
                                  + std::to_string(vars->at("num_nextn_predict_layers"))
                                  + " but the checkpoint holds no multi-token-prediction layer (mtp.layers.*): the "
                                    "model is written without it, which transformers loads as it is (it skips MTP "
                                    "weights); vLLM's MTP speculative decoding needs a checkpoint trained with MTP");
    result.valueModel = valueModel;
    result.tiedEmbeddings = vars->count("tie_word_embeddings") && vars->at("tie_word_embeddings") != 0;

    auto expected = expectedHfParameters(set, *vars);
    TESSERA_TRY(expected);
    std::unordered_map<std::string, std::size_t> expectedIndex;
    for (std::size_t i = 0; i < expected->size(); ++i)
        expectedIndex.emplace((*expected)[i].name, i);
    auto unstackRules = compileRules(set.unstack, *vars);
    TESSERA_TRY(unstackRules);
    auto mapRules = compileRules(set.rules, *vars, set.ranges);
    TESSERA_TRY(mapRules);

    // Map every source item.
    struct Produced {
        std::size_t row;
        TensorInfo tensor;
        bool dropped = false; ///< a stacked target with experts no source fills: not written
    };
    std::vector<Produced> produced;
    std::unordered_map<std::string, std::size_t> byTarget; // target → index into produced
    ExpertStacks stacks;
    for (const TensorInfo& t : source.tensors) {
        for (Item& item : unstack(t, *unstackRules)) {
            MappingRow base;
            base.source = item.label;
            base.sourceShape = item.sourceShape;
            // A LoRA factor maps through the rule of the weight it adapts (see mapLoraFactor()).
            const auto adapter = parseMegatronAdapterName(item.name);
            const std::string& ruleName = adapter ? adapter->weight : item.name;
            const CompiledRule* rule = nullptr;
            Captures captures;
            for (const auto& r : *mapRules) {
                for (const auto& p : r.megatron)
                    if (auto c = matchPattern(p, ruleName)) {
                        rule = &r;
                        captures = std::move(*c);
                        break;
                    }
                if (rule)
                    break;
            }
            if (!rule) {
                base.transform = item.chain;
                base.status = ignored(item.name) ? MappingStatus::Ignored : MappingStatus::Unmapped;
                base.detail = base.status == MappingStatus::Ignored
                    ? "no rule maps it; --ignore_missing_params covers it, so it is not written"
                    : "no " + set.family + " rule maps " + item.name
                          + "; add a rule with --param_mapping, or leave it out with --ignore_missing_params";
                result.rows.push_back(std::move(base));
                continue;
            }
            captures = offsetLayer(std::move(captures), rule->layerOffset);
            base.rule = rule->rule->id;
            base.ruleOrigin = rule->rule->origin;
            base.transform = (item.chain.empty() ? "" : item.chain + " + ") + mappingTransformText(*rule->rule);
            if (adapter) {
                auto factors = mapLoraFactor(*rule, item, *adapter, captures, *vars, source, result.warnings);
                if (!factors) {
                    base.status = MappingStatus::ShapeMismatch;
                    base.detail = item.name + " " + shapeToString(item.tensor.shape) + " " + factors.error().message;
                    result.rows.push_back(std::move(base));
                    continue;
                }
                base.transform += adapter->isA ? " (LoRA A, one copy per target)" : " (LoRA B)";
                for (auto& o : *factors) {
                    MappingRow row = base;
                    row.target = o.name;
                    row.targetShape = o.tensor.shape;
                    row.detail = "a LoRA factor: the merge fuses it into the weight it adapts and writes it to the "
                                 "adapter folder";
                    const std::size_t rowIndex = result.rows.size();
                    result.rows.push_back(std::move(row));
                    if (byTarget.emplace(o.name, produced.size()).second)
                        produced.push_back({ rowIndex, std::move(o.tensor) });
                }
                continue;
            }
            auto outputs = applyTransform(*rule, item, captures, *vars, source, result.warnings);
            if (!outputs) {
                base.status = MappingStatus::ShapeMismatch;
                base.target = render(rule->rule->hf.front(), captures);
                base.detail = item.name + " " + shapeToString(item.tensor.shape) + " " + outputs.error().message;
                result.rows.push_back(std::move(base));
                continue;
            }
            for (auto& o : *outputs) {
                MappingRow row = base;
                row.target = o.name;
                const Shape& shape = o.tensor.outputShape();
                row.targetShape = shape;
                auto e = expectedIndex.find(o.name);
                if (e != expectedIndex.end()) {
                    const ExpectedParameter& p = (*expected)[e->second];
                    row.expectedShape = p.shape;
                    if (p.shape != shape) {
                        row.status = MappingStatus::ShapeMismatch;
                        row.detail = "is " + shapeToString(shape) + " but config.json gives " + shapeToString(p.shape)
                            + " " + p.shapeText;
                        for (std::size_t d = 0; d < p.shape.size() && d < shape.size(); ++d)
                            if (p.shape[d] != shape[d]) {
                                row.detail += tpHint(shape[d], p.shape[d], source);
                                break;
                            }
                    }
                } else if (o.name == "lm_head.weight" && result.tiedEmbeddings) {
                    row.status = MappingStatus::Tied;
                    row.detail = "the embeddings are tied, so the merge drops it after checking it equals "
                                 "model.embed_tokens.weight";
                } else {
                    row.status = ignored(o.name) ? MappingStatus::Ignored : MappingStatus::Unexpected;
                    const bool mtp = rule->layerOffset != 0 || item.chain.rfind("rename", 0) == 0;
                    row.detail = row.status == MappingStatus::Ignored
                        ? "not a parameter of this model; --ignore_missing_params covers it, so it is not written"
                        : mtp ? "a multi-token-prediction layer's tensor, but " + config->path
                                    + " gives no MTP layer (num_nextn_predict_layers); set it there to write the "
                                      "layer, or leave it out with --ignore_missing_params"
                              : "not a parameter of " + set.family + " under " + config->path
                                    + " (an option such as attention_bias or tie_word_embeddings may be wrong there)";
                }
                const std::size_t rowIndex = result.rows.size();
                result.rows.push_back(std::move(row));
                if (result.rows.back().status == MappingStatus::ShapeMismatch
                    || result.rows.back().status == MappingStatus::Ignored)
                    continue;
                auto [it, inserted] = byTarget.emplace(o.name, produced.size());
                if (o.stackEntry >= 0 && (inserted || stacks.contains(o.name))) {
                    // One expert of a stacked target: its boxes join the other experts' in the one tensor.
                    MappingRow& filled = result.rows[rowIndex];
                    const std::string entry = "expert " + std::to_string(o.stackEntry);
                    if (auto before = stacks.add(o.name, o.stackEntry, rule->experts, rowIndex)) {
                        MappingRow& first = result.rows[*before];
                        filled.status = MappingStatus::Duplicate;
                        filled.detail = entry + " also written from " + first.source;
                        if (first.status != MappingStatus::Duplicate) {
                            first.status = MappingStatus::Duplicate;
                            first.detail = entry + " also written from " + filled.source;
                        }
                        continue;
                    }
                    if (inserted) {
                        produced.push_back({ rowIndex, std::move(o.tensor) });
                        continue;
                    }
                    TensorInfo& whole = produced[it->second].tensor;
                    if (whole.shape != o.tensor.shape || whole.savedShape != o.tensor.savedShape
                        || whole.dtype != o.tensor.dtype) {
                        filled.status = MappingStatus::ShapeMismatch;
                        filled.detail = entry + " makes it " + shapeToString(o.tensor.outputShape()) + " "
                            + std::string(torchName(o.tensor.dtype)) + ", but " + result.rows[produced[it->second].row].source
                            + " makes it " + shapeToString(whole.outputShape()) + " " + std::string(torchName(whole.dtype));
                        continue;
                    }
                    for (Piece& p : o.tensor.pieces)
                        whole.pieces.push_back(std::move(p));
                    continue;
                }
                if (!inserted) {
                    MappingRow& first = result.rows[produced[it->second].row];
                    MappingRow& again = result.rows[rowIndex];
                    again.detail = "also written from " + first.source + " (rule " + first.rule + ")";
                    again.status = MappingStatus::Duplicate;
                    if (first.status != MappingStatus::Duplicate) {
                        first.detail = "also written from " + again.source + " (rule " + again.rule + ")";
                        first.status = MappingStatus::Duplicate;
                    }
                    continue;
                }
                produced.push_back({ rowIndex, std::move(o.tensor) });
            }
        }
    }

    // Stacked targets some experts of which no source fills (an expert rank's files not there) are not written.
    for (const auto& [target, missing] : stacks.incomplete()) {
        Produced& p = produced[byTarget.at(target)];
        p.dropped = true;
        MappingRow row;
        row.target = target;
        row.rule = result.rows[p.row].rule;
        row.ruleOrigin = result.rows[p.row].ruleOrigin;
        row.transform = result.rows[p.row].transform;
        row.expectedShape = result.rows[p.row].expectedShape;
        row.status = ignored(target) ? MappingStatus::Ignored : MappingStatus::Missing;
        std::string experts;
        for (std::size_t i = 0; i < missing.size() && i < 8; ++i)
            experts += (i ? ", " : "") + std::to_string(missing[i]);
        if (missing.size() > 8)
            experts += " … (" + std::to_string(missing.size()) + " in all)";
        row.detail = "holds every expert, and no source fills expert(s) " + experts
            + " (is an expert rank missing?); it is not written";
        result.rows.push_back(std::move(row));
    }

    // Expected parameters nothing fills.
    for (const auto& p : *expected) {
        if (byTarget.count(p.name))
            continue;
        bool mentioned = false; // a row already explains it (shape mismatch, duplicate)
        for (const auto& r : result.rows)
            if (r.target == p.name && r.status != MappingStatus::Ok) {
                mentioned = true;
                break;
            }
        if (mentioned)
            continue;
        MappingRow row;
        row.target = p.name;
        row.expectedShape = p.shape;
        row.status = ignored(p.name) ? MappingStatus::Ignored : MappingStatus::Missing;
        std::string from;
        for (const auto& r : *mapRules)
            for (const auto& h : r.hf)
                if (auto c = matchPattern(h, p.name); c && from.empty()) {
                    from = render(r.rule->megatron.front(), offsetLayer(*c, -r.layerOffset));
                    row.rule = r.rule->id;
                    row.ruleOrigin = r.rule->origin;
                    row.transform = mappingTransformText(*r.rule);
                }
        if (row.status == MappingStatus::Ignored) {
            row.detail = "no source fills it; --ignore_missing_params covers it, so the output lacks it";
        } else if (p.name == "lm_head.weight") {
            row.detail = "config.json says tie_word_embeddings is false, so the output layer must come from the "
                         "checkpoint (" + (from.empty() ? std::string("output_layer.weight") : from)
                         + ", held by the last pipeline stage), and it is not there; is a stage missing, or is "
                           "the model really tied?";
        } else {
            row.detail = "no source tensor fills it"
                + (from.empty() ? std::string("; no rule writes this name") : "; rule " + row.rule + " reads it from " + from)
                + " (is a pipeline stage, expert rank or layer missing?)";
        }
        result.rows.push_back(std::move(row));
    }

    // Problems: wrong output is never written; --no-strict lets incomplete output through.
    for (const auto& r : result.rows) {
        const std::string name = r.target.empty() ? r.source : r.target;
        const std::string text = std::string(mappingStatusName(r.status)) + ": "
            + (r.source.empty() || r.target.empty() ? "" : r.source + " → ") + r.detail;
        switch (r.status) {
        case MappingStatus::ShapeMismatch:
        case MappingStatus::Duplicate:
            result.problems.push_back({ result.configPath, name, text });
            break;
        case MappingStatus::Unmapped:
        case MappingStatus::Missing:
        case MappingStatus::Unexpected:
            if (options.strict)
                result.problems.push_back({ result.configPath, name, text });
            else
                result.warnings.push_back(printableText(name) + ": " + text);
            break;
        case MappingStatus::Ok:
        case MappingStatus::Ignored:
        case MappingStatus::Tied:
            break;
        }
    }

    // The mapped checkpoint, in the model's parameter order (the order Hugging Face shards by).
    std::vector<std::size_t> order(produced.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    auto rank = [&](std::size_t i) {
        auto it = expectedIndex.find(produced[i].tensor.name);
        return it == expectedIndex.end() ? expected->size() : it->second;
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rank(a) < rank(b); });
    CheckpointInfo& mapped = result.mapped;
    mapped.layout = "hf (mapped from " + source.layout + ")";
    mapped.root = source.root;
    mapped.hfConfigDir = configDir;
    mapped.parallel = source.parallel;
    mapped.files = source.files;
    mapped.notes = source.notes;
    mapped.notes["mapping_rules"] = set.family;
    mapped.notes["source_layout"] = source.layout;
    for (std::size_t i : order)
        if (!produced[i].dropped)
            mapped.tensors.push_back(std::move(produced[i].tensor));
    mapped.problems = source.problems;
    for (const auto& p : result.problems)
        mapped.problems.push_back(p);
    return result;
}

} // namespace tessera
