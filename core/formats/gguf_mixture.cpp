// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_mixture.h"

#include "text_util.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace tessera {

namespace {

/// llama.cpp's llama_ftype numbers of the mixtures whose rules differ (general.file_type).
enum FileType : std::uint32_t {
    kQ2_K = 10,
    kQ3_K_M = 12,
    kQ4_K_S = 14,
    kQ4_K_M = 15,
    kQ5_K_M = 17,
};

/// The quantizer's broad kinds of tensor, told apart by name alone.
enum class Category { Output, TokenEmbedding, AttentionV, AttentionK, AttentionQ, AttentionOutput, FfnUp, FfnGate,
                      FfnDown, Other };

bool contains(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

/// The first match wins, in llama.cpp's order: a fused QKV or MLA's kv_b counts as attn_v.
Category categoryOf(const std::string& name)
{
    if (name == "output.weight")
        return Category::Output;
    if (name == "token_embd.weight" || name == "per_layer_token_embd.weight")
        return Category::TokenEmbedding;
    if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight"))
        return Category::AttentionV;
    if (contains(name, "attn_k.weight"))
        return Category::AttentionK;
    if (contains(name, "attn_q.weight"))
        return Category::AttentionQ;
    if (contains(name, "attn_output.weight"))
        return Category::AttentionOutput;
    if (contains(name, "ffn_up"))
        return Category::FfnUp;
    if (contains(name, "ffn_gate"))
        return Category::FfnGate;
    if (contains(name, "ffn_down"))
        return Category::FfnDown;
    return Category::Other;
}

/// ggml_n_dims: trailing dimensions of 1 do not count, so a [hidden, 1] "matrix" (Qwen2-MoE's shared-expert gate)
/// is a vector to the quantizer.
std::size_t ggmlDimCount(const std::vector<std::uint64_t>& dims)
{
    for (std::size_t i = dims.size(); i > 1; --i)
        if (dims[i - 1] > 1)
            return i;
    return 1;
}

/// Whether the quantizer touches the tensor at all: matrices (2-D, or 3-D expert stacks) named "…weight", except
/// norms, the MoE router and the small or positional tensors llama.cpp lists. Only names that occur in the
/// architectures Tessera writes, and those a plain export could carry, are tested.
bool quantizable(const GgufMixtureTensor& t)
{
    if (ggmlDimCount(t.dims) < 2 || !endsWith(t.name, "weight"))
        return false;
    for (const char* kept : { "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
                              "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "attn_rel_b.weight",
                              ".position_embd", ".rel_pos", ".patch_embd", ".patch_merger" })
        if (contains(t.name, kept))
            return false;
    return t.name != "position_embd.weight" && t.name != "token_types.weight";
}

/// The layer of "blk.N.…", or -1.
int layerOf(const std::string& name)
{
    int layer = -1;
    if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1)
        return -1;
    return layer;
}

/// llama.cpp's use_more_bits: the first and last eighth of the layers and every third one between.
bool useMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/// The order the quantizer visits tensors in (its weights map): by layer (non-layer tensors first), then by name.
/// Its running counters of attn_v and ffn_down tensors follow this order, not the file's.
std::vector<std::size_t> quantizerOrder(const std::vector<GgufMixtureTensor>& tensors)
{
    std::vector<std::size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), std::size_t { 0 });
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const int la = layerOf(tensors[a].name), lb = layerOf(tensors[b].name);
        return la != lb ? la < lb : tensors[a].name < tensors[b].name;
    });
    return order;
}

/// The state the rules carry from tensor to tensor, and the facts they read.
struct MixtureState {
    std::uint32_t fileType = 0;
    GgmlType base = GgmlType::F32;  ///< the mixture's default type
    int layers = 0;
    int experts = 0;                ///< expert_count, 0 for dense
    std::uint64_t gqa = 0;          ///< heads / kv heads (0 without kv heads)
    bool seventyB = false;          ///< llama.cpp's LLM_TYPE_70B
    bool tiedEmbeddings = true;     ///< no output.weight in the file
    int attentionV = 0;             ///< how many attn_v-like tensors the file holds
    int iAttentionV = 0, iFfnDown = 0;
};

/// The layer an FFN rule looks at: the running count in a dense model, the name's layer in a MoE one (whose
/// experts' tensors need not come in layer order).
Result<int> ffnLayer(const MixtureState& s, int counter, const std::string& name)
{
    if (std::max(1, s.experts) <= 1)
        return counter;
    const int layer = layerOf(name);
    if (layer < 0)
        return makeError("cannot tell the layer of the expert tensor " + name + " for the quantization mixture");
    if (layer >= s.layers)
        return makeError(name + " is in layer " + std::to_string(layer) + " but the model has "
                         + std::to_string(s.layers) + " layers");
    return layer;
}

GgmlType outputRule(const MixtureState& s, std::uint64_t rowLength)
{
    if (rowLength % ggmlType(s.base).blockElements != 0)
        return GgmlType::Q8_0;
    return s.base == GgmlType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
}

GgmlType attentionVRule(MixtureState& s, GgmlType type)
{
    if (s.fileType == kQ2_K)
        type = s.gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
    else if (s.fileType == kQ3_K_M)
        type = s.iAttentionV < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    else if ((s.fileType == kQ4_K_M || s.fileType == kQ5_K_M) && useMoreBits(s.iAttentionV, s.attentionV))
        type = GgmlType::Q6_K;
    else if (s.fileType == kQ4_K_S && s.iAttentionV < 4)
        type = GgmlType::Q5_K;
    // A 70B model's attn_v is 8× smaller than its attn_q: more bits cost little there.
    if (s.seventyB && (type == GgmlType::Q3_K || type == GgmlType::Q4_K))
        type = GgmlType::Q5_K;
    if (s.experts == 8)
        type = GgmlType::Q8_0;
    ++s.iAttentionV;
    return type;
}

Result<GgmlType> ffnDownRule(MixtureState& s, GgmlType type, const std::string& name)
{
    auto layer = ffnLayer(s, s.iFfnDown, name);
    TESSERA_TRY(layer);
    const int i = *layer, n = s.layers;
    if (s.fileType == kQ2_K)
        type = GgmlType::Q3_K;
    else if (s.fileType == kQ3_K_M)
        type = i < n / 16 ? GgmlType::Q5_K : GgmlType::Q4_K; // Q3_K only for Falcon, which Tessera does not write
    else if (s.fileType == kQ4_K_M) {
        if (useMoreBits(i, n))
            type = GgmlType::Q6_K;
    } else if (s.fileType == kQ5_K_M && useMoreBits(i, n))
        type = GgmlType::Q6_K;
    else if (s.fileType == kQ4_K_S && i < n / 8)
        type = GgmlType::Q5_K;
    ++s.iFfnDown;
    return type;
}

GgmlType attentionOutputRule(const MixtureState& s, GgmlType type)
{
    if (s.experts == 8) {
        if (s.fileType == kQ2_K || s.fileType == kQ3_K_M || s.fileType == kQ4_K_S || s.fileType == kQ4_K_M)
            type = GgmlType::Q5_K;
    } else if (s.fileType == kQ2_K)
        type = GgmlType::Q3_K;
    else if (s.fileType == kQ3_K_M)
        type = GgmlType::Q4_K;
    return type;
}

/// llama_tensor_get_type_impl for the mixtures Tessera offers.
Result<GgmlType> mixtureRule(MixtureState& s, const GgufMixtureTensor& t)
{
    const Category category = categoryOf(t.name);
    if (category == Category::Output || (s.tiedEmbeddings && category == Category::TokenEmbedding))
        return outputRule(s, t.dims[0]);
    switch (category) {
    case Category::AttentionV:
        return attentionVRule(s, s.base);
    case Category::AttentionK:
        return s.experts == 8 ? GgmlType::Q8_0 : s.base;
    case Category::FfnDown:
        return ffnDownRule(s, s.base, t.name);
    case Category::AttentionOutput:
        return attentionOutputRule(s, s.base);
    case Category::FfnGate:
    case Category::FfnUp: {
        // No rule for these mixtures, but a MoE tensor must still name a layer the model has.
        auto layer = ffnLayer(s, 0, t.name);
        TESSERA_TRY(layer);
        return s.base;
    }
    default:
        return s.base;
    }
}

/// `type`, or the table's fallback chain when rows of `rowLength` are not whole blocks of it.
GgufMixtureChoice fitted(GgmlType type, std::uint64_t rowLength)
{
    const GgmlType fits = ggmlTypeForRows(type, rowLength);
    return { fits, fits != type };
}

MixtureState stateFor(const GgufOutTypeInfo& outType, const GgufMixtureModel& model,
                      const std::vector<GgufMixtureTensor>& tensors)
{
    MixtureState s;
    s.fileType = outType.fileType;
    s.base = outType.tensorType;
    s.layers = static_cast<int>(model.layers);
    s.experts = static_cast<int>(model.experts);
    s.gqa = model.kvHeads == 0 ? 0 : model.heads / model.kvHeads;
    s.seventyB = model.layers == 80
        && ((model.architecture == "llama" && model.heads != model.kvHeads) || model.architecture == "qwen2");
    for (const auto& t : tensors) {
        const Category c = categoryOf(t.name);
        s.attentionV += c == Category::AttentionV ? 1 : 0;
        s.tiedEmbeddings = s.tiedEmbeddings && c != Category::Output;
    }
    return s;
}

} // namespace

Result<std::vector<GgufMixtureChoice>> ggufMixtureTypes(const GgufOutTypeInfo& outType, const GgufMixtureModel& model,
                                                        const std::vector<GgufMixtureTensor>& tensors)
{
    std::vector<GgufMixtureChoice> choices(tensors.size());
    for (std::size_t k = 0; k < tensors.size(); ++k)
        choices[k].type = tensors[k].stored;
    if (!outType.tensorTypeInfo().quantized())
        return makeError(std::string(outType.name) + " is not a quantized output type");
    MixtureState state = stateFor(outType, model, tensors);
    for (std::size_t k : quantizerOrder(tensors)) {
        const GgufMixtureTensor& t = tensors[k];
        if (!quantizable(t))
            continue;
        auto type = mixtureRule(state, t);
        TESSERA_TRY(type);
        choices[k] = fitted(*type, t.dims[0]);
    }
    return choices;
}

} // namespace tessera
