// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/megatron_transforms.h"

#include "io/printable.h"
#include "mapping/expert_stacks.h"
#include "mapping/peft_names.h"
#include "model/tensor_reindex.h"

#include <array>
#include <charconv>

namespace tessera::mapping_internal {

namespace {

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

/// A config.json value the transforms need, or nothing when config.json (and the rules' defaults) lack it.
std::optional<std::int64_t> configVar(const ConfigVars& vars, const char* name)
{
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
}

/// trim_vocab: the rows past config.json's vocab_size are padding, dropped with a warning.
Result<std::vector<Output>> trimVocab(const Item& item, const std::vector<std::string>& names, const ConfigVars& vars,
                                      const CheckpointInfo& source, std::vector<std::string>& warnings)
{
    const TensorInfo& t = item.tensor;
    const std::int64_t rows = t.shape.empty() ? 0 : t.shape[0];
    std::vector<Output> out;
    const auto vocab = configVar(vars, "vocab_size");
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
    return out;
}

/// split_qkv: Megatron's fused QKV, grouped per query group ([q…; k; v] each), into q_proj, k_proj and v_proj.
Result<std::vector<Output>> splitQkv(const Item& item, const std::vector<std::string>& names, const ConfigVars& vars,
                                     const CheckpointInfo& source)
{
    const TensorInfo& t = item.tensor;
    const std::int64_t rows = t.shape.empty() ? 0 : t.shape[0];
    std::vector<Output> out;
    const auto nh = configVar(vars, "num_attention_heads"), ng = configVar(vars, "num_key_value_heads"),
               hd = configVar(vars, "head_dim");
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
    return out;
}

/// fuse_qkv_heads: per-head [q_h; k_h; v_h] rows reordered to all queries, then keys, then values.
Result<std::vector<Output>> fuseQkvHeads(const CompiledRule& rule, const Item& item,
                                         const std::vector<std::string>& names, const ConfigVars& vars,
                                         const CheckpointInfo& source)
{
    const TensorInfo& t = item.tensor;
    const std::int64_t rows = t.shape.empty() ? 0 : t.shape[0];
    std::vector<Output> out;
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
    return out;
}

/// PEFT's name of a LoRA factor of the Hugging Face weight `weight` ("….q_proj.weight" → "base_model.model.…
/// q_proj.lora_B.weight"), the form the LoRA reader and adapter_model.safetensors use.
std::string peftFactorName(const std::string& weight, bool isA)
{
    const std::string module = weight.size() > 7 && weight.compare(weight.size() - 7, 7, ".weight") == 0
        ? weight.substr(0, weight.size() - 7)
        : weight;
    return std::string(kPeftPrefix) + module + (isA ? ".lora_A.weight" : ".lora_B.weight");
}

} // namespace

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

Result<std::vector<Output>> applyTransform(const CompiledRule& rule, const Item& item, const Captures& captures,
                                           const ConfigVars& vars, const CheckpointInfo& source,
                                           std::vector<std::string>& warnings)
{
    const TensorInfo& t = item.tensor;
    std::vector<std::string> names;
    for (const auto& h : rule.rule->hf)
        names.push_back(render(h, captures));
    const std::int64_t rows = t.shape.empty() ? 0 : t.shape[0];
    std::vector<Output> out;
    switch (rule.rule->transform) {
    case MappingTransform::Copy: {
        TensorInfo copy = t;
        copy.name = names[0];
        out.push_back({ names[0], std::move(copy) });
        break;
    }
    case MappingTransform::TrimVocab:
        return trimVocab(item, names, vars, source, warnings);
    case MappingTransform::SplitGateUp: {
        if (t.shape.empty() || rows % 2 != 0)
            return makeError("a gated linear_fc1 needs an even number of rows ([gate; up]); it has shape "
                             + shapeToString(t.shape));
        const std::int64_t half = rows / 2;
        out.push_back({ names[0], rowSlices(t, names[0], half, { { 0, half, 0 } }, "first half (gate) of " + item.label) });
        out.push_back({ names[1], rowSlices(t, names[1], half, { { half, half, 0 } }, "second half (up) of " + item.label) });
        break;
    }
    case MappingTransform::SplitQkv:
        return splitQkv(item, names, vars, source);
    case MappingTransform::FuseQkvHeads:
        return fuseQkvHeads(rule, item, names, vars, source);
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

} // namespace tessera::mapping_internal
