// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/megatron_names.h"

#include "io/regex.h"
#include "text_util.h"

#include <charconv>

namespace tessera {

namespace {
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// The parameter kind after the module path: "weight", "bias", "weight3" (TEGroupedMLP) → "weight"/"bias".
std::string paramKind(const std::string& name)
{
    const auto dot = name.rfind('.');
    std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
    while (!last.empty() && last.back() >= '0' && last.back() <= '9')
        last.pop_back();
    return last;
}

/// The module path without the parameter ("…mlp.linear_fc1" for "…mlp.linear_fc1.weight").
std::string modulePath(const std::string& name)
{
    const auto dot = name.rfind('.');
    return dot == std::string::npos ? std::string() : name.substr(0, dot);
}
} // namespace

bool isMegatronExtraState(const std::string& name) { return contains(name, "_extra_state"); }

MegatronTpSplit megatronTpSplit(const std::string& name, bool gated)
{
    // LoRA factors (Megatron-Bridge's ParallelLinearAdapter around a linear): linear_in (A) is a RowParallelLinear
    // for a row-parallel linear (its input columns are split) and a ColumnParallelLinear of r rows otherwise;
    // linear_out (B) is a ColumnParallelLinear whose rows follow the wrapped linear's output rows (GLU halves
    // included). Around a replicated linear both are whole on every rank.
    if (const auto at = name.find(kMegatronAdapterMarker); at != std::string::npos) {
        const MegatronTpSplit base = megatronTpSplit(name.substr(0, at) + ".weight", gated);
        if (base == MegatronTpSplit::Replicated)
            return base;
        const bool isA = name.compare(at, std::string(kMegatronAdapterMarker).size() + 2,
                                      std::string(kMegatronAdapterMarker) + "in") == 0;
        if (isA)
            return base == MegatronTpSplit::Columns ? MegatronTpSplit::Columns : MegatronTpSplit::Rows;
        return base == MegatronTpSplit::Columns ? MegatronTpSplit::Rows : base;
    }
    const std::string kind = paramKind(name);
    const std::string module = modulePath(name);
    // Norms (including the ones fused into TE linears as layer_norm_weight/bias), routers and the shared-expert
    // gate are plain modules that every TP rank holds in full.
    // A vision tower's patch embedding is a plain Conv3d, the same on every rank; Megatron-Bridge keeps a
    // vision-language model's Hugging Face tower (visual.*) whole on every rank.
    if (name.rfind("visual.", 0) == 0)
        return MegatronTpSplit::Replicated;
    if (contains(name, "layer_norm") || contains(name, "layernorm") || contains(name, "router")
        || endsWith(name, "shared_experts.gate_weight") || contains(name, "position_embeddings")
        || contains(name, "patch_embed."))
        return MegatronTpSplit::Replicated;
    // A multi-token-prediction layer's norms of the embedding and of the hidden state.
    if (endsWith(module, "enorm") || endsWith(module, "hnorm"))
        return MegatronTpSplit::Replicated;
    // MLA's down projections are built with parallel_mode="duplicated".
    if (endsWith(module, "linear_q_down_proj") || endsWith(module, "linear_kv_down_proj"))
        return MegatronTpSplit::Replicated;
    const bool rowParallel = endsWith(module, "linear_proj") || endsWith(module, "linear_fc2");
    if (rowParallel)
        // A RowParallelLinear's bias is added after the all-reduce, so every rank has all of it.
        return kind == "bias" ? MegatronTpSplit::Replicated : MegatronTpSplit::Columns;
    // A multimodal projector's MLP (vision_model.projection.encoder) is never gated, whatever the model's MLPs are.
    if (gated && endsWith(module, "linear_fc1") && (kind == "weight" || kind == "bias")
        && !contains(name, "projection.encoder."))
        return MegatronTpSplit::GluRows;
    // Column-parallel linears (linear_qkv, linear_fc1, MLA up projections), VocabParallelEmbedding and the
    // output layer: rows are split. Unknown parameters are treated the same way, as Megatron's own legacy
    // merge does.
    return MegatronTpSplit::Rows;
}

namespace {

/// The decimal number `digits` if it is at most kMaxMegatronIndex.
std::optional<std::int64_t> smallIndex(const std::string& digits)
{
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size() || value > kMaxMegatronIndex)
        return std::nullopt;
    return value;
}

} // namespace

std::optional<MegatronAdapterName> parseMegatronAdapterName(const std::string& name)
{
    const auto at = name.find(kMegatronAdapterMarker);
    if (at == std::string::npos)
        return std::nullopt;
    const std::string rest = name.substr(at + std::string(kMegatronAdapterMarker).size());
    if (rest != "in.weight" && rest != "out.weight")
        return std::nullopt;
    return MegatronAdapterName { name.substr(0, at) + ".weight", rest == "in.weight" };
}

std::string megatronIndexProblem(const std::string& name)
{
    static const Regex number
        = Regex::fixed(R"((?:\blayers\.|\blocal_experts\.|\blinear_fc[12]\.(?:weight|bias))(\d+))");
    for (const std::string& digits : number.findAll(name, 1))
        if (!smallIndex(digits))
            return "the layer or expert number " + digits.substr(0, 24) + " in this name is out of range (at most "
                + std::to_string(kMaxMegatronIndex) + ")";
    return {};
}

std::optional<MegatronLayerName> parseMegatronLayerName(const std::string& name)
{
    static const Regex pattern = Regex::fixed(R"((.*?\blayers\.)(\d+)\.(.+))");
    std::vector<std::string> m;
    if (!pattern.fullMatch(name, m))
        return std::nullopt;
    // Only the decoder's stack is split over pipeline stages (a vision-language model's is under language_model.);
    // MTP or vision towers keep their numbers.
    if (m[0] != "decoder.layers." && m[0] != "language_model.decoder.layers.")
        return std::nullopt;
    const auto layer = smallIndex(m[1]);
    if (!layer)
        return std::nullopt;
    MegatronLayerName out;
    out.prefix = m[0];
    out.layer = *layer;
    out.rest = m[2];
    return out;
}

std::optional<MegatronMtpName> parseMegatronMtpName(const std::string& name)
{
    static const Regex pattern = Regex::fixed(R"((mtp\.layers\.)(\d+)\.(.+))");
    std::vector<std::string> m;
    if (!pattern.fullMatch(name, m))
        return std::nullopt;
    const auto index = smallIndex(m[1]);
    if (!index)
        return std::nullopt;
    return MegatronMtpName { m[0] + m[1] + ".", *index, m[2] };
}

std::optional<MegatronExpertName> parseMegatronExpertName(const std::string& rest)
{
    static const Regex sequential = Regex::fixed(R"((.*\bmlp\.experts\.local_experts\.)(\d+)(\..+))");
    static const Regex grouped = Regex::fixed(R"((.*\bmlp\.experts\.linear_fc[12]\.(?:weight|bias))(\d+))");
    std::vector<std::string> m; // before, number and, for a sequential expert, after
    if (!sequential.fullMatch(rest, m) && !grouped.fullMatch(rest, m))
        return std::nullopt;
    const auto expert = smallIndex(m[1]);
    if (!expert)
        return std::nullopt;
    MegatronExpertName out;
    out.before = m[0];
    out.expert = *expert;
    out.after = m.size() > 2 ? m[2] : std::string();
    return out;
}

} // namespace tessera
