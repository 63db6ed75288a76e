// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/gguf_hparams.h"

#include "listed_items.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <set>

using nlohmann::json;

namespace tessera {

Result<GgufHparams> readGgufHparams(const json& c, const GgufArchitecture& arch, const std::string& file)
{
    GgufHparams h;
    std::vector<std::string> missing;
    auto integer = [&](const char* key, std::int64_t& out, bool required) {
        if (c.contains(key) && c[key].is_number_integer() && c[key].get<std::int64_t>() >= 0
            && c[key].get<std::int64_t>() < (1ll << 32))
            out = c[key].get<std::int64_t>();
        else if (required)
            missing.push_back(key);
    };
    integer("hidden_size", h.hidden, true);
    integer("num_hidden_layers", h.layers, true);
    integer("num_attention_heads", h.heads, true);
    integer("intermediate_size", h.ffn, !arch.moe);
    integer("max_position_embeddings", h.context, true);
    h.vocab = -1;
    integer("vocab_size", h.vocab, false);
    h.kvHeads = h.heads;
    integer("num_key_value_heads", h.kvHeads, false);
    h.headDimGiven = c.contains("head_dim") && c["head_dim"].is_number_integer();
    if (h.headDimGiven)
        integer("head_dim", h.headDim, true);
    else if (h.heads > 0)
        h.headDim = h.hidden / h.heads;
    if (c.contains("rms_norm_eps") && c["rms_norm_eps"].is_number())
        h.eps = c["rms_norm_eps"].get<double>();
    else
        missing.push_back("rms_norm_eps");
    if (c.contains("rope_theta") && c["rope_theta"].is_number())
        h.theta = c["rope_theta"].get<double>();
    if (arch.moe) {
        h.expertsKey = c.contains("num_local_experts") ? "num_local_experts" : "num_experts";
        integer(h.expertsKey.c_str(), h.experts, true);
        integer("num_experts_per_tok", h.expertsUsed, true);
        if (arch.name != "llama")
            integer("moe_intermediate_size", h.expertFfn, true);
        if (arch.name == "qwen2moe")
            integer("shared_expert_intermediate_size", h.sharedFfn, false);
    }
    if (!missing.empty()) {
        std::string keys;
        for (const auto& k : missing)
            keys += (keys.empty() ? "" : ", ") + k;
        return makeError(file + ": " + keys + " missing or not a number; a GGUF " + arch.name + " model needs "
                         + (missing.size() == 1 ? "it" : "them"));
    }
    return h;
}

namespace {

/// A dimension llama.cpp computes from config.json's numbers: its size and where it comes from, for messages.
struct Dim {
    std::int64_t size = -1; ///< -1: any (config.json does not give it)
    std::string source;     ///< "hidden_size is 256"
};

/// The dimensions every tensor is built from, as llama.cpp's loader builds them.
struct Dims {
    Dim hidden, vocab, q, kv, headDim, ffn, experts, expertFfn, sharedFfn;
};

std::int64_t product(std::int64_t a, std::int64_t b)
{
    if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a)
        return std::numeric_limits<std::int64_t>::max();
    return a * b;
}

Dims dimsOf(const GgufHparams& hp, const GgufArchitecture& arch)
{
    auto n = [](std::int64_t v) { return std::to_string(v); };
    const std::string derived = hp.headDimGiven ? "" : " (head_dim = hidden_size / num_attention_heads)";
    Dims d;
    d.hidden = { hp.hidden, "hidden_size is " + n(hp.hidden) };
    if (hp.vocab >= 0)
        d.vocab = { hp.vocab, "vocab_size is " + n(hp.vocab) };
    d.q = { product(hp.heads, hp.headDim), "num_attention_heads × head_dim is " + n(hp.heads) + " × " + n(hp.headDim)
                                               + " = " + n(product(hp.heads, hp.headDim)) + derived };
    d.kv = { product(hp.kvHeads, hp.headDim), "num_key_value_heads × head_dim is " + n(hp.kvHeads) + " × "
                                                  + n(hp.headDim) + " = " + n(product(hp.kvHeads, hp.headDim)) + derived };
    d.headDim = { hp.headDim, "head_dim is " + n(hp.headDim) + derived };
    d.ffn = { hp.ffn, "intermediate_size is " + n(hp.ffn) };
    d.experts = { hp.experts, hp.expertsKey + " is " + n(hp.experts) };
    // Mixtral's experts are intermediate_size wide; Qwen's have their own size, and so may Qwen2-MoE's shared
    // expert (llama.cpp falls back to feed_forward_length, as the export writes it).
    d.expertFfn = arch.name == "llama" ? d.ffn : Dim { hp.expertFfn, "moe_intermediate_size is " + n(hp.expertFfn) };
    d.sharedFfn = hp.sharedFfn > 0 ? Dim { hp.sharedFfn, "shared_expert_intermediate_size is " + n(hp.sharedFfn) } : d.ffn;
    return d;
}

/// The shape llama.cpp loads a tensor with, in PyTorch order, by its GGUF name (after `blk.N.` for a layer's);
/// empty when the name is not one of these.
std::vector<Dim> expectedShape(const std::string& name, const Dims& d)
{
    const std::map<std::string, std::vector<Dim>> shapes = {
        { "token_embd.weight", { d.vocab, d.hidden } },
        { "output.weight", { d.vocab, d.hidden } },
        { "output_norm.weight", { d.hidden } },
        { "attn_norm.weight", { d.hidden } },
        { "ffn_norm.weight", { d.hidden } },
        { "attn_q.weight", { d.q, d.hidden } },
        { "attn_q.bias", { d.q } },
        { "attn_k.weight", { d.kv, d.hidden } },
        { "attn_k.bias", { d.kv } },
        { "attn_v.weight", { d.kv, d.hidden } },
        { "attn_v.bias", { d.kv } },
        { "attn_output.weight", { d.hidden, d.q } },
        { "attn_output.bias", { d.hidden } },
        { "attn_q_norm.weight", { d.headDim } },
        { "attn_k_norm.weight", { d.headDim } },
        { "ffn_gate.weight", { d.ffn, d.hidden } },
        { "ffn_up.weight", { d.ffn, d.hidden } },
        { "ffn_down.weight", { d.hidden, d.ffn } },
        { "ffn_gate_inp.weight", { d.experts, d.hidden } },
        { "ffn_gate_exps.weight", { d.expertFfn, d.hidden } }, // one expert's
        { "ffn_up_exps.weight", { d.expertFfn, d.hidden } },
        { "ffn_down_exps.weight", { d.hidden, d.expertFfn } },
        { "ffn_gate_shexp.weight", { d.sharedFfn, d.hidden } },
        { "ffn_up_shexp.weight", { d.sharedFfn, d.hidden } },
        { "ffn_down_shexp.weight", { d.hidden, d.sharedFfn } },
        { "ffn_gate_inp_shexp.weight", { Dim { 1, "a shared expert gate of 1 row" }, d.hidden } },
    };
    auto it = shapes.find(name);
    return it == shapes.end() ? std::vector<Dim>() : it->second;
}

/// The tensors of a layer an architecture loads (GGUF names after `blk.N.`): required, or taken when present.
std::map<std::string, bool> layerTensors(const GgufArchitecture& arch)
{
    std::map<std::string, bool> required;
    for (const char* name : { "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                              "ffn_norm.weight" })
        required[name] = true;
    const bool qwen2 = arch.name == "qwen2" || arch.name == "qwen2moe";
    const bool qwen3 = arch.name == "qwen3" || arch.name == "qwen3moe";
    for (const char* name : { "attn_q.bias", "attn_k.bias", "attn_v.bias" })
        if (qwen2 || arch.name == "llama")
            required[name] = qwen2;
    if (arch.name == "llama")
        required["attn_output.bias"] = false;
    for (const char* name : { "attn_q_norm.weight", "attn_k_norm.weight" })
        if (qwen3)
            required[name] = true;
    if (arch.moe) {
        for (const char* name : { "ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight" })
            required[name] = true;
    } else {
        for (const char* name : { "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight" })
            required[name] = true;
    }
    if (arch.name == "qwen2moe")
        for (const char* name : { "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight",
                                  "ffn_gate_inp_shexp.weight" })
            required[name] = true;
    return required;
}

/// "0–1, 3, 5–9" for messages.
std::string rangesText(const std::set<std::int64_t>& values)
{
    std::string s;
    std::size_t shown = 0;
    for (auto it = values.begin(); it != values.end();) {
        std::int64_t first = *it, last = first;
        while (++it != values.end() && *it == last + 1)
            ++last;
        if (++shown > 8) {
            s += ", …";
            break;
        }
        s += (s.empty() ? "" : ", ") + std::to_string(first) + (last > first ? "–" + std::to_string(last) : "");
    }
    return s.empty() ? "none" : s;
}

/// "model.layers.N.self_attn.q_proj.bias" for the GGUF name `blk.N.<name>`, for messages.
std::string hfPattern(const std::string& name, bool mixtral)
{
    const bool expert = name.find("_exps.") != std::string::npos;
    std::string hf = hfTensorName("blk.0." + name, expert ? 0 : -1, mixtral);
    if (hf.empty())
        return "blk.N." + name;
    auto swap = [&](const std::string& a, const std::string& b) {
        const auto at = hf.find(a);
        if (at != std::string::npos)
            hf.replace(at, a.size(), b);
    };
    swap("layers.0.", "layers.N.");
    swap("experts.0.", "experts.E.");
    return hf;
}

/// Numbers llama.cpp cannot use, whatever the tensors.
void checkValues(const GgufHparams& hp, const GgufArchitecture& arch, std::vector<std::string>& reasons)
{
    auto n = [](std::int64_t v) { return std::to_string(v); };
    if (hp.heads == 0 || hp.kvHeads == 0 || hp.heads % hp.kvHeads != 0)
        reasons.push_back(n(hp.heads) + " attention heads and " + n(hp.kvHeads)
                          + " key/value heads do not make grouped-query attention");
    if (hp.headDim <= 0 || hp.headDim % 2 != 0)
        reasons.push_back("head_dim is " + n(hp.headDim) + "; the rotary embedding turns pairs of values, so it must be "
                          "a positive even number");
    if (hp.context <= 0)
        reasons.push_back("max_position_embeddings is 0; llama.cpp needs the context length the model was trained for");
    if (!(hp.eps > 0) || !std::isfinite(hp.eps))
        reasons.push_back("rms_norm_eps is " + std::to_string(hp.eps) + "; it must be a small positive number");
    if (!(hp.theta > 0) || !std::isfinite(hp.theta))
        reasons.push_back("rope_theta is " + std::to_string(hp.theta) + "; it must be a positive number");
    if (arch.moe && (hp.expertsUsed < 1 || hp.expertsUsed > hp.experts))
        reasons.push_back("num_experts_per_tok is " + n(hp.expertsUsed) + "; llama.cpp needs 1 to " + hp.expertsKey + " ("
                          + n(hp.experts) + ")");
}

/// What the checkpoint's tensors say about the numbers, gathered in one pass over their names and shapes.
class TensorSurvey {
public:
    TensorSurvey(const GgufHparams& hp, const GgufArchitecture& arch, const Dims& dims)
        : m_hp(hp), m_arch(arch), m_dims(dims), m_perLayer(layerTensors(arch)), m_mixtral(arch.name == "llama" && arch.moe)
    {
    }

    void add(const TensorInfo& t, const GgufNameMapping& mapped)
    {
        std::string name = mapped.name;
        if (name.rfind("blk.", 0) == 0) {
            const std::size_t dot = name.find('.', 4);
            const std::int64_t layer = std::stoll(name.substr(4, dot - 4)); // ggufTensorName wrote ≤ 6 digits
            name = name.substr(dot + 1);
            m_layers.insert(layer);
            if (!m_perLayer.count(name)) {
                m_unexpected[name].push_back(t.name);
                return;
            }
            m_present[name].insert(layer);
            if (mapped.expert >= 0)
                m_experts[{ layer, name }].insert(mapped.expert);
        } else {
            m_top.insert(name);
        }
        const std::vector<Dim> shape = expectedShape(name, m_dims);
        if (shape.empty())
            return;
        const std::string example = t.name + " is " + shapeToString(t.shape);
        if (t.shape.size() != shape.size()) {
            m_reasons.push_back(example + ", but llama.cpp's " + m_arch.name + " holds it in "
                                + std::to_string(shape.size()) + " dimension" + (shape.size() == 1 ? "" : "s"));
            return;
        }
        for (std::size_t d = 0; d < shape.size(); ++d)
            if (shape[d].size >= 0 && t.shape[d] != shape[d].size)
                disagree(shape[d].source, example);
    }

    /// Each number of config.json the tensors disagree with, with the first tensor that does as the example.
    void shapeReasons(std::vector<std::string>& reasons)
    {
        for (const auto& [layerAndName, found] : m_experts)
            if (static_cast<std::int64_t>(found.size()) != m_hp.experts)
                disagree(m_dims.experts.source, "layer " + std::to_string(layerAndName.first) + " has "
                                                    + std::to_string(found.size()) + " experts in "
                                                    + hfPattern(layerAndName.second, m_mixtral));
        reasons.insert(reasons.end(), m_reasons.begin(), m_reasons.end());
        for (const auto& source : m_order) {
            const Disagreement& d = m_disagreements[source];
            reasons.push_back(source + ", but " + d.example
                              + (d.count > 1 ? " (and " + std::to_string(d.count - 1) + " more like it)" : ""));
        }
        // llama.cpp loads layers 0 … num_hidden_layers − 1 and refuses a file with tensors it did not load.
        const bool allLayers = static_cast<std::int64_t>(m_layers.size()) == m_hp.layers
            && (m_layers.empty() || (*m_layers.begin() == 0 && *m_layers.rbegin() == m_hp.layers - 1));
        if (!allLayers)
            reasons.push_back("num_hidden_layers is " + std::to_string(m_hp.layers) + ", but the checkpoint has layers "
                              + rangesText(m_layers));
    }

    /// Tensors the architecture needs that are not there, and tensors it has no place for: the checkpoint is
    /// another model than `architectures` says.
    void modelReasons(std::vector<std::string>& reasons)
    {
        for (const char* name : { "token_embd.weight", "output_norm.weight" })
            if (!m_top.count(name))
                reasons.push_back("llama.cpp needs " + hfTensorName(name, -1, m_mixtral) + ", which the checkpoint does not have");
        for (const auto& [name, required] : m_perLayer) {
            if (!required)
                continue;
            std::set<std::int64_t> missing;
            for (std::int64_t layer : m_layers)
                if (!m_present[name].count(layer))
                    missing.insert(layer);
            if (!missing.empty())
                reasons.push_back(kind() + " needs " + hfPattern(name, m_mixtral) + " in every layer; layers "
                                  + rangesText(missing) + " have none");
        }
        for (const auto& [name, tensors] : m_unexpected)
            reasons.push_back(tensors.front()
                              + (tensors.size() > 1 ? " (and " + std::to_string(tensors.size() - 1) + " more like it)" : "")
                              + ": " + kind() + " has no place for it");
    }

    std::string kind() const { return "llama.cpp's " + m_arch.name + (m_arch.moe ? " with experts" : ""); }

private:
    /// Tensors that disagree with one number of config.json: the first as the example, how many more.
    struct Disagreement {
        std::string example;
        std::size_t count = 0;
    };
    void disagree(const std::string& source, const std::string& example)
    {
        auto [it, inserted] = m_disagreements.try_emplace(source);
        if (inserted) {
            m_order.push_back(source);
            it->second.example = example;
        }
        ++it->second.count;
    }

    const GgufHparams& m_hp;
    const GgufArchitecture& m_arch;
    const Dims& m_dims;
    const std::map<std::string, bool> m_perLayer;
    const bool m_mixtral;
    std::vector<std::string> m_reasons;                              ///< tensors of the wrong rank
    std::vector<std::string> m_order;                                ///< numbers disagreed with, as first seen
    std::map<std::string, Disagreement> m_disagreements;
    std::set<std::int64_t> m_layers;
    std::map<std::string, std::set<std::int64_t>> m_present;         ///< layer tensor → layers holding it
    std::map<std::pair<std::int64_t, std::string>, std::set<int>> m_experts; ///< (layer, stacked name) → experts
    std::map<std::string, std::vector<std::string>> m_unexpected;    ///< layer tensor → the tensors of that kind
    std::set<std::string> m_top;
};

} // namespace

Status checkGgufHparams(const GgufHparams& hp, const GgufArchitecture& arch, const CheckpointInfo& info, bool tied,
                        const std::string& file)
{
    std::vector<std::string> reasons;
    checkValues(hp, arch, reasons);
    Dims dims = dimsOf(hp, arch);
    if (dims.vocab.size < 0) // no vocab_size: the output head has the embedding's rows, whatever they are
        for (const TensorInfo& t : info.tensors)
            if (t.name == "model.embed_tokens.weight" && t.shape.size() == 2)
                dims.vocab = { t.shape[0], "model.embed_tokens.weight has " + std::to_string(t.shape[0]) + " rows" };
    if (dims.vocab.size == 0)
        reasons.push_back("the vocabulary is empty (" + dims.vocab.source + ")");
    TensorSurvey survey(hp, arch, dims);
    const TensorInfo* embedding = nullptr;
    const TensorInfo* head = nullptr;
    for (const TensorInfo& t : info.tensors) {
        embedding = t.name == "model.embed_tokens.weight" ? &t : embedding;
        head = t.name == "lm_head.weight" ? &t : head;
        const auto mapped = ggufTensorName(t.name);
        if (mapped && !mapped->skip && !(tied && t.name == "lm_head.weight"))
            survey.add(t, *mapped); // a tensor with no llama.cpp name is refused by name by the plan
    }
    // Tied, the head is not written and llama.cpp uses the embedding for it: a head of another shape is no copy.
    if (tied && head && embedding && head->shape != embedding->shape)
        reasons.push_back("tie_word_embeddings makes the output head the embedding, but lm_head.weight is "
                          + shapeToString(head->shape) + " and model.embed_tokens.weight " + shapeToString(embedding->shape));
    survey.shapeReasons(reasons);
    const std::size_t numberProblems = reasons.size();
    survey.modelReasons(reasons);
    if (reasons.empty())
        return Status::success();
    const bool anotherModel = reasons.size() > numberProblems;
    return makeError(file + " does not describe the checkpoint's tensors, so llama.cpp could not load the GGUF file ("
                     + std::to_string(reasons.size()) + " problem" + (reasons.size() == 1 ? "" : "s")
                     + "; nothing was written):" + listedItems(reasons, 20)
                     + (anotherModel ? "\n  (its `architectures` makes the file " + survey.kind() + "; is that this model?)"
                                     : ""));
}

} // namespace tessera
