// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_names.h"
#include "text_util.h"

#include <cstdlib>
#include <utility>

namespace tessera {

namespace {

struct ArchEntry {
    const char* hf;
    GgufArchitecture arch;
};

const ArchEntry kArchitectures[] = {
    { "LlamaForCausalLM", { "llama", true, false } },
    { "MistralForCausalLM", { "llama", true, false } },
    { "MixtralForCausalLM", { "llama", true, true } },
    { "Qwen2ForCausalLM", { "qwen2", false, false } },
    { "Qwen3ForCausalLM", { "qwen3", false, false } },
    { "Qwen2MoeForCausalLM", { "qwen2moe", false, true } },
    { "Qwen3MoeForCausalLM", { "qwen3moe", false, true } },
};

/// Per-layer names: the part after `model.layers.N.` and after `blk.N.`.
const std::pair<const char*, const char*> kLayerNames[] = {
    { "input_layernorm.weight", "attn_norm.weight" },
    { "self_attn.q_proj.weight", "attn_q.weight" },
    { "self_attn.q_proj.bias", "attn_q.bias" },
    { "self_attn.k_proj.weight", "attn_k.weight" },
    { "self_attn.k_proj.bias", "attn_k.bias" },
    { "self_attn.v_proj.weight", "attn_v.weight" },
    { "self_attn.v_proj.bias", "attn_v.bias" },
    { "self_attn.o_proj.weight", "attn_output.weight" },
    { "self_attn.o_proj.bias", "attn_output.bias" },
    { "self_attn.q_norm.weight", "attn_q_norm.weight" },
    { "self_attn.k_norm.weight", "attn_k_norm.weight" },
    { "post_attention_layernorm.weight", "ffn_norm.weight" },
    { "mlp.gate_proj.weight", "ffn_gate.weight" },
    { "mlp.up_proj.weight", "ffn_up.weight" },
    { "mlp.down_proj.weight", "ffn_down.weight" },
    { "mlp.gate.weight", "ffn_gate_inp.weight" },
    { "block_sparse_moe.gate.weight", "ffn_gate_inp.weight" },
    { "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight" },
    { "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight" },
    { "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight" },
    { "mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight" },
};

/// Expert projections: (Qwen MoE name, Mixtral name, stacked GGUF name).
struct ExpertName {
    const char* qwen;
    const char* mixtral;
    const char* gguf;
};
const ExpertName kExpertNames[] = {
    { "gate_proj.weight", "w1.weight", "ffn_gate_exps.weight" },
    { "up_proj.weight", "w3.weight", "ffn_up_exps.weight" },
    { "down_proj.weight", "w2.weight", "ffn_down_exps.weight" },
};

const std::pair<const char*, const char*> kTopNames[] = {
    { "model.embed_tokens.weight", "token_embd.weight" },
    { "model.norm.weight", "output_norm.weight" },
    { "lm_head.weight", "output.weight" },
};

/// Reads a decimal number at s[pos…] up to the next '.', advancing pos past the dot.
std::optional<int> number(const std::string& s, std::size_t& pos)
{
    const std::size_t dot = s.find('.', pos);
    if (dot == std::string::npos || dot == pos || dot - pos > 6)
        return std::nullopt;
    int v = 0;
    for (std::size_t i = pos; i < dot; ++i) {
        if (s[i] < '0' || s[i] > '9')
            return std::nullopt;
        v = v * 10 + (s[i] - '0');
    }
    pos = dot + 1;
    return v;
}

} // namespace

std::optional<GgufArchitecture> ggufArchitectureFor(const std::string& hfArchitecture)
{
    for (const auto& e : kArchitectures)
        if (hfArchitecture == e.hf)
            return e.arch;
    return std::nullopt;
}

std::vector<std::string> ggufSupportedHfArchitectures()
{
    std::vector<std::string> names;
    for (const auto& e : kArchitectures)
        names.push_back(e.hf);
    return names;
}

std::optional<GgufNameMapping> ggufTensorName(const std::string& hfName)
{
    for (const auto& [hf, gguf] : kTopNames)
        if (hfName == hf)
            return GgufNameMapping { gguf, -1, false };
    if (endsWith(hfName, "rotary_emb.inv_freq"))
        return GgufNameMapping { "", -1, true };
    const std::string prefix = "model.layers.";
    if (!startsWith(hfName, prefix))
        return std::nullopt;
    std::size_t pos = prefix.size();
    const auto layer = number(hfName, pos);
    if (!layer)
        return std::nullopt;
    const std::string rest = hfName.substr(pos);
    const std::string blk = "blk." + std::to_string(*layer) + ".";
    for (const auto& [hf, gguf] : kLayerNames)
        if (rest == hf)
            return GgufNameMapping { blk + gguf, -1, false };
    for (const char* experts : { "mlp.experts.", "block_sparse_moe.experts." }) {
        if (!startsWith(rest, experts))
            continue;
        std::size_t p = std::string(experts).size();
        const auto expert = number(rest, p);
        if (!expert)
            return std::nullopt;
        const std::string proj = rest.substr(p);
        const bool mixtral = std::string(experts) == "block_sparse_moe.experts.";
        for (const auto& e : kExpertNames)
            if (proj == (mixtral ? e.mixtral : e.qwen))
                return GgufNameMapping { blk + e.gguf, *expert, false };
    }
    return std::nullopt;
}

std::string hfTensorName(const std::string& ggufName, int expert, bool mixtral)
{
    for (const auto& [hf, gguf] : kTopNames)
        if (ggufName == gguf)
            return hf;
    if (!startsWith(ggufName, "blk."))
        return {};
    std::size_t pos = 4;
    const auto layer = number(ggufName, pos);
    if (!layer)
        return {};
    const std::string rest = ggufName.substr(pos);
    const std::string layers = "model.layers." + std::to_string(*layer) + ".";
    if (expert >= 0) {
        for (const auto& e : kExpertNames)
            if (rest == e.gguf)
                return layers + (mixtral ? "block_sparse_moe.experts." : "mlp.experts.") + std::to_string(expert) + "."
                    + (mixtral ? e.mixtral : e.qwen);
        return {};
    }
    if (rest == "ffn_gate_inp.weight")
        return layers + (mixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight");
    for (const auto& [hf, gguf] : kLayerNames)
        if (rest == gguf)
            return layers + hf;
    return {};
}

} // namespace tessera
