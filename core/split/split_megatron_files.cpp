// SPDX-License-Identifier: GPL-3.0-or-later
// The Megatron split's files: the placed Megatron tensors (split_megatron.cpp) laid out as verl's Megatron-core
// rank files, Megatron-LM's model_optim_rng.pt files or a torch_dist folder, with their keystone.
#include "split/split_megatron_planner.h"

#include "formats/megatron_names.h"
#include "pickle/pickle_writer.h"
#include "text_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace tessera::megatron_plan {

/// What torch_dist needs to know of each layer stack: how many layers it has, and whether they are all alike.
struct LayerStack {
    std::int64_t layers = 0;
    bool homogeneous = true;
};

namespace {

/// Where a Megatron-core module comes in its layer's state dict (module registration order).
int layerOrder(const std::string& rest)
{
    static const std::vector<std::string> order { "input_layernorm", "self_attention.linear_proj",
                                                  "self_attention.linear_qkv.layer_norm", "self_attention.linear_qkv",
                                                  "self_attention.q_layernorm", "self_attention.k_layernorm",
                                                  "pre_mlp_layernorm", "mlp.router", "mlp.linear_fc1.layer_norm",
                                                  "mlp.linear_fc1", "mlp.linear_fc2", "mlp.experts", "mlp.shared_experts" };
    for (std::size_t i = 0; i < order.size(); ++i)
        if (rest.rfind(order[i], 0) == 0)
            return static_cast<int>(i);
    return static_cast<int>(order.size());
}

/// Sort key of a Megatron tensor in its rank file: embedding, layers in order, final norm, output layer.
std::tuple<int, std::int64_t, int, std::int64_t, std::string> fileOrder(const MegatronTensor& m)
{
    if (auto layer = parseMegatronLayerName(m.localName)) {
        std::int64_t expert = -1;
        if (auto e = parseMegatronExpertName(layer->rest))
            expert = e->expert;
        return { 1, layer->layer, layerOrder(layer->rest), expert, m.localName };
    }
    const std::string name = inLanguageModel(m.localName);
    if (name.rfind("embedding.", 0) == 0)
        return { 0, 0, 0, 0, m.localName };
    if (name.rfind("decoder.final_layernorm", 0) == 0)
        return { 2, 0, 0, 0, m.localName };
    // GPTModel registers its MTP block after the decoder and before the output layer.
    if (auto mtp = parseMegatronMtpName(m.localName)) {
        const auto dot = mtp->rest.find('.');
        const std::string rest = dot == std::string::npos ? mtp->rest : mtp->rest.substr(dot + 1);
        std::int64_t expert = -1;
        if (auto e = parseMegatronExpertName(rest))
            expert = e->expert;
        return { 2, 1 + mtp->index, layerOrder(rest), expert, m.localName };
    }
    if (name.rfind("output_layer", 0) == 0)
        return { 3, 0, 0, 0, m.localName };
    return { 0, 1, 0, 0, m.localName };
}

/// Where a planned tensor goes in torch_dist: its key and the leading axes it is stacked on there.
struct DistKey {
    std::string name;
    Shape leadingOffsets; ///< this tensor's place on the leading axes
    Shape leadingDims;    ///< the leading axes' global sizes
};

/// `mlp.experts.local_experts.` + `<j>` + `.linear_fc1.weight` (or TEGroupedMLP's `mlp.experts.linear_fc1.weight`
/// + `<j>`) as TEGroupedMLP's sharded key: `mlp.experts.experts.linear_fc1.weight`.
std::string groupedExpertKey(const MegatronExpertName& e)
{
    static const std::string sequential = "local_experts.";
    if (endsWith(e.before, sequential))
        return e.before.substr(0, e.before.size() - sequential.size()) + "experts." + e.after.substr(1);
    const auto dot = e.before.rfind("linear_fc");
    return e.before.substr(0, dot) + "experts." + e.before.substr(dot);
}

/// A layer of one of the model's TransformerBlocks: the decoder's (under language_model. in a vision-language
/// model) or a vision tower's, each stacked on its own layer axis in torch_dist.
struct StackedLayer {
    std::string prefix; ///< "decoder.layers.", "vision_model.decoder.layers."
    std::int64_t layer = 0;
    std::string rest;
};

std::optional<StackedLayer> parseStackedLayer(const std::string& name)
{
    if (auto layer = parseMegatronLayerName(name))
        return StackedLayer { layer->prefix, layer->layer, layer->rest };
    static const std::string vision = "vision_model.decoder.layers.";
    if (name.rfind(vision, 0) != 0)
        return std::nullopt;
    const auto dot = name.find('.', vision.size());
    const std::string digits = name.substr(vision.size(), dot == std::string::npos ? std::string::npos : dot - vision.size());
    if (dot == std::string::npos || digits.empty() || digits.size() > 6
        || digits.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    return StackedLayer { vision, std::stoll(digits), name.substr(dot + 1) };
}

/// Megatron-core's sharded keys: a homogeneous layer stack (every layer alike) is stacked on a leading layer axis
/// under `decoder.layers.<param>`; a mixed one (dense first layers, then MoE) keeps `decoder.layers.<i>.<param>`;
/// routed experts are stacked on an expert axis after it (TEGroupedMLP); an MTP layer keeps its own name.
DistKey distKey(const MegatronTensor& m, const std::map<std::string, LayerStack>& stacks, std::int64_t experts)
{
    DistKey key { m.name, {}, {} };
    std::string prefix, rest;
    if (auto layer = parseStackedLayer(m.name)) {
        rest = layer->rest;
        const LayerStack& stack = stacks.at(layer->prefix);
        if (stack.homogeneous) {
            prefix = layer->prefix;
            key.leadingOffsets.push_back(layer->layer);
            key.leadingDims.push_back(stack.layers);
        } else {
            prefix = layer->prefix + std::to_string(layer->layer) + ".";
        }
    } else if (auto mtp = parseMegatronMtpName(m.name)) {
        prefix = mtp->prefix;
        rest = mtp->rest;
        // Megatron-core saves a GPT MTP layer's transformer layer under its pre-2026 name, transformer_layer, in
        // sharded checkpoints (MultiTokenPredictionLayer.sharded_state_dict's backward-compatible prefix mapping).
        static const std::string current = "mtp_model_layer.";
        if (rest.rfind(current, 0) == 0)
            rest = "transformer_layer." + rest.substr(current.size());
    } else {
        return key;
    }
    if (auto e = parseMegatronExpertName(rest)) {
        rest = groupedExpertKey(*e);
        key.leadingOffsets.push_back(e->expert);
        key.leadingDims.push_back(experts);
    }
    key.name = prefix + rest;
    return key;
}

/// Megatron-LM's model_optim_rng.pt items besides the model: `args` (the argparse Namespace its loader and
/// Tessera's reader take the sizes from), `checkpoint_version` and `iteration`, pickled as key/value pairs.
template <typename FindTensor>
std::string megatronLmArgsItems(const ConfigVars& vars, const SplitOptions& options, bool tied, bool gated,
                                std::int64_t experts, const std::vector<MegatronTensor>& megatron, const MergePlan& model,
                                const FindTensor& findTensor)
{
    Pickler p;
    auto integer = [&](const char* key, std::int64_t v) {
        p.str(key);
        p.integer(v);
    };
    auto boolean = [&](const char* key, bool v) {
        p.str(key);
        p.op(v ? '\x88' : '\x89');
    };
    const std::int64_t heads = var(vars, "num_attention_heads");
    const std::int64_t hidden = var(vars, "hidden_size");
    p.str("args");
    p.global("argparse", "Namespace");
    p.op(')');
    p.op('\x81');
    p.op('}');
    p.op('(');
    integer("tensor_model_parallel_size", options.tp);
    integer("pipeline_model_parallel_size", options.pp);
    p.str("virtual_pipeline_model_parallel_size");
    if (options.vpp > 1)
        p.integer(options.vpp);
    else
        p.op('N');
    integer("expert_model_parallel_size", options.ep);
    // Megatron-LM's argument names for uneven stages (--decoder-first/last-pipeline-num-layers).
    if (options.firstStageLayers)
        integer("decoder_first_pipeline_num_layers", *options.firstStageLayers);
    if (options.lastStageLayers)
        integer("decoder_last_pipeline_num_layers", *options.lastStageLayers);
    integer("num_layers", var(vars, "num_hidden_layers"));
    integer("hidden_size", hidden);
    integer("ffn_hidden_size", var(vars, "intermediate_size"));
    integer("num_attention_heads", heads);
    boolean("group_query_attention", var(vars, "num_key_value_heads", heads) != heads);
    integer("num_query_groups", var(vars, "num_key_value_heads", heads));
    integer("kv_channels", var(vars, "head_dim", heads ? hidden / heads : 0));
    auto embedding = findTensor("embedding.word_embeddings.weight");
    if (!embedding)
        embedding = findTensor("language_model.embedding.word_embeddings.weight");
    if (embedding)
        integer("padded_vocab_size", megatron[*embedding].shape[0]);
    integer("make_vocab_size_divisible_by", options.vocabDivisibleBy);
    boolean("swiglu", gated);
    boolean("add_qkv_bias", std::any_of(model.tensors.begin(), model.tensors.end(), [](const PlannedTensor& t) {
                return t.name.find("self_attn.q_proj.bias") != std::string::npos;
            }));
    boolean("untie_embeddings_and_output_weights", !tied);
    // Every family Tessera maps is a RoPE decoder with RMSNorm.
    p.str("normalization");
    p.str("RMSNorm");
    p.str("position_embedding_type");
    p.str("rope");
    if (experts > 0)
        integer("num_experts", experts);
    const DType dtype = model.tensors.empty() ? DType::BFloat16 : model.tensors.front().dtype;
    boolean("bf16", dtype == DType::BFloat16);
    boolean("fp16", dtype == DType::Float16);
    p.str("params_dtype");
    p.dtype(dtype);
    integer("iteration", options.iteration.value_or(0));
    p.op('u');
    p.op('b');
    p.str("checkpoint_version");
    p.real(3.0);
    p.str("iteration");
    if (options.iteration)
        p.integer(*options.iteration);
    else
        p.str("release");
    return p.out;
}

/// torch_dist's common.pt: the checkpoint version and the run's iteration.
std::string distCommonPickle(std::optional<std::int64_t> runIteration)
{
    Pickler common;
    common.op('\x80');
    common.op('\x02');
    common.op('}');
    common.op('(');
    common.str("checkpoint_version");
    common.real(3.0);
    common.str("iteration");
    common.integer(runIteration.value_or(0));
    common.op('u');
    common.op('.');
    return common.out;
}

} // namespace

/// The files: one per (TP, PP, EP) rank, each a list of one state dict per virtual stage.
SplitPlan MegatronPlanner::planFiles() const
{
    SplitPlan plan;
    plan.format = SplitFormat::Megatron;
    plan.worldSize = tp * pp * ep;
    plan.mesh = { pp, ep, tp };
    plan.meshDimNames = { "pp", "ep", "tp" };
    plan.config = model.config;
    plan.sideFolder = "hf_config_and_tokenizer";
    plan.runIteration = options.runIteration;
    for (const auto& t : model.tensors)
        plan.largestTensorBytes = std::max(plan.largestTensorBytes, t.bytes);
    for (const auto& m : megatron) {
        std::uint64_t bytes = dtypeSize(m.dtype);
        for (auto s : m.shape)
            bytes *= static_cast<std::uint64_t>(s);
        plan.largestTensorBytes = std::max(plan.largestTensorBytes, bytes);
    }
    std::vector<std::size_t> order(megatron.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return fileOrder(megatron[a]) < fileOrder(megatron[b]); });
    if (dist)
        planDistFiles(plan, order);
    else
        planRankFiles(plan, order);
    return plan;
}

/// torch_dist: one DCP item per chunk. A layer's tensors are chunks [1, …] of a tensor stacked on a leading
/// global layer axis (when the layers are alike) and a routed expert's on an expert axis; a gated
/// linear_fc1 is two chunks per TP rank (its gate and up rows of the global [gate; up]); a tensor every TP
/// rank holds is saved by the first one only, as Megatron dedups replicas.
void MegatronPlanner::planDistFiles(SplitPlan& plan, const std::vector<std::size_t>& order) const
{
    plan.dcpFolder = "dist_ckpt";
    plan.sideFolder = "huggingface";
    const std::map<std::string, LayerStack> stacks = layerStacks();
    plan.mesh = { pp, tp };
    plan.meshDimNames = { "pp", "tp" };
    for (int s = 0; s < pp; ++s)
        for (int r = 0; r < tp; ++r) {
            SplitFile file;
            file.rank = s * tp + r;
            file.name = plan.dcpFolder + "/__" + std::to_string(file.rank) + "_0.distcp";
            file.archiveName = "archive";
            file.kind = SplitFile::Kind::DcpItems;
            for (std::size_t mi : order) {
                const MegatronTensor& m = megatron[mi];
                if (m.stage != s || (m.split == MegatronTpSplit::Replicated && r != 0))
                    continue;
                addDistItems(file, mi, r, stacks);
            }
            plan.totalBytes += file.bytes;
            plan.diskBytes += file.bytes + file.tensors.size() * 1200 + 4096;
            plan.files.push_back(std::move(file));
        }
    plan.generatedFiles.emplace_back(plan.dcpFolder + "/metadata.json",
                                     R"({"sharded_backend": "torch_dist", "sharded_backend_version": 1, )"
                                     R"("common_backend": "torch", "common_backend_version": 1})");
    plan.generatedPickles.emplace_back(plan.dcpFolder + "/common.pt", distCommonPickle(options.runIteration));
}

/// Megatron stacks a block's layers only when they all have the same parameters (moe_layer_freq not a list).
std::map<std::string, LayerStack> MegatronPlanner::layerStacks() const
{
    std::map<std::string, std::map<std::int64_t, std::set<std::string>>> layerParams; // stack → layer → params
    for (const auto& m : megatron)
        if (auto layer = parseStackedLayer(m.name)) {
            std::string rest = layer->rest;
            if (auto e = parseMegatronExpertName(rest))
                rest = groupedExpertKey(*e);
            layerParams[layer->prefix][layer->layer].insert(rest);
        }
    std::map<std::string, LayerStack> stacks;
    for (const auto& [prefix, params] : layerParams) {
        LayerStack& stack = stacks[prefix];
        stack.layers = params.rbegin()->first + 1;
        const auto& first = params.begin()->second;
        stack.homogeneous = static_cast<std::int64_t>(params.size()) == stack.layers
            && std::all_of(params.begin(), params.end(), [&first](const auto& l) { return l.second == first; });
    }
    return stacks;
}

/// TP rank r's chunks of megatron[mi] as DCP items of `file`, keyed and placed as Megatron-core shards them.
void MegatronPlanner::addDistItems(SplitFile& file, std::size_t mi, int r,
                                   const std::map<std::string, LayerStack>& stacks) const
{
    const MegatronTensor& m = megatron[mi];
    const Shape& local = localShapes[mi];
    Shape offsets(local.size(), 0);
    if (m.split == MegatronTpSplit::Rows)
        offsets[0] = r * local[0];
    else if (m.split == MegatronTpSplit::Columns)
        offsets[1] = r * local[1];
    std::vector<std::pair<Shape, Shape>> chunkBoxes; // (offsets, sizes) in the unstacked tensor
    if (m.split == MegatronTpSplit::GluRows) {
        Shape half = local;
        half[0] /= 2;
        Shape gate = offsets, up = offsets;
        gate[0] = r * half[0];
        up[0] = tp * half[0] + r * half[0];
        chunkBoxes = { { gate, half }, { up, half } };
    } else {
        chunkBoxes = { { offsets, local } };
    }
    std::uint64_t chunkElements = 1;
    for (auto d : chunkBoxes.front().second)
        chunkElements *= static_cast<std::uint64_t>(d);
    for (std::size_t c = 0; c < chunkBoxes.size(); ++c) {
        SplitTensor out;
        const DistKey key = distKey(m, stacks, experts);
        out.spec.name = key.name;
        out.spec.dtype = m.dtype;
        out.spec.shape = chunkBoxes[c].second;
        out.chunkOffsets = chunkBoxes[c].first;
        out.globalShape = m.shape;
        out.spec.shape.insert(out.spec.shape.begin(), key.leadingDims.size(), 1);
        out.chunkOffsets.insert(out.chunkOffsets.begin(), key.leadingOffsets.begin(), key.leadingOffsets.end());
        out.globalShape.insert(out.globalShape.begin(), key.leadingDims.begin(), key.leadingDims.end());
        // The fragments of this chunk, at their place inside it.
        const std::uint64_t begin = c * chunkElements, end = begin + chunkElements;
        for (SplitFragment f : fragments[mi][static_cast<std::size_t>(r)])
            if (*f.localElement >= begin && *f.localElement < end) {
                *f.localElement -= begin;
                out.fragments.push_back(std::move(f));
            }
        file.bytes += out.spec.storageBytes();
        file.tensors.push_back(std::move(out));
    }
}

/// Megatron-LM keeps its own layout: ITER/mp_rank_…/model_optim_rng.pt, the sizes in an argparse
/// Namespace beside the model, the step in latest_checkpointed_iteration.txt.
void MegatronPlanner::planRankFiles(SplitPlan& plan, const std::vector<std::size_t>& order) const
{
    const std::string iterationFolder = [&] {
        if (!options.iteration)
            return std::string("release");
        char name[32];
        std::snprintf(name, sizeof name, "iter_%07lld", static_cast<long long>(*options.iteration));
        return std::string(name);
    }();
    std::string megatronLmItems;
    if (options.megatronLm)
        megatronLmItems = megatronLmArgsItems(vars, options, tied, gated, experts, megatron, model,
                                              [this](const std::string& name) { return findTensor(name); });
    for (int s = 0; s < pp; ++s)
        for (int e = 0; e < ep; ++e)
            for (int r = 0; r < tp; ++r) {
                SplitFile file = rankFile(s, e, r, order, iterationFolder, megatronLmItems);
                plan.totalBytes += file.bytes;
                plan.diskBytes += file.bytes + file.tensors.size() * 400 + 4096;
                plan.files.push_back(std::move(file));
            }
}

/// The file of pipeline stage s, expert rank e, TP rank r: its tensors of each virtual stage, in file order.
SplitFile MegatronPlanner::rankFile(int s, int e, int r, const std::vector<std::size_t>& order,
                                   const std::string& iterationFolder, const std::string& megatronLmItems) const
{
    char folder[64];
    SplitFile file;
    std::snprintf(folder, sizeof folder, "mp_rank_%02d", r);
    std::string name = folder;
    if (pp > 1) {
        std::snprintf(folder, sizeof folder, "_%03d", s);
        name += folder;
    }
    if (ep > 1) {
        std::snprintf(folder, sizeof folder, "_%03d", e);
        name += folder;
    }
    if (options.megatronLm) {
        file.name = iterationFolder + "/" + name + "/model_optim_rng.pt";
        file.archiveName = "model_optim_rng";
        file.rootItems = megatronLmItems;
        for (int v = 0; v < vpp; ++v)
            file.chunkKeys.push_back(vpp > 1 ? "model" + std::to_string(v) : "model");
    } else {
        file.name = "model/" + name + "/model.pt";
        file.archiveName = "model";
    }
    file.kind = SplitFile::Kind::StateDict;
    file.rank = (s * ep + e) * tp + r;
    for (int v = 0; v < vpp; ++v) {
        std::size_t count = 0;
        for (std::size_t mi : order) {
            const MegatronTensor& m = megatron[mi];
            if (m.stage != s || m.virtualStage != v || (m.epRank && *m.epRank != e))
                continue;
            SplitTensor out;
            out.spec.name = m.localName;
            out.spec.dtype = m.dtype;
            out.spec.shape = localShapes[mi];
            out.globalShape = m.shape;
            out.fragments = fragments[mi][static_cast<std::size_t>(r)];
            file.bytes += out.spec.storageBytes();
            file.tensors.push_back(std::move(out));
            ++count;
        }
        file.listChunks.push_back(count);
    }
    return file;
}

/// The keystone (transformer_config.json, or Megatron-LM's latest_checkpointed_iteration.txt), the layout's
/// description, and the disk and memory estimates.
void MegatronPlanner::describePlan(SplitPlan& plan) const
{
    const std::int64_t heads = var(vars, "num_attention_heads");
    const std::int64_t hidden = var(vars, "hidden_size");
    nlohmann::json transformer {
        { "num_layers", layers },
        { "hidden_size", hidden },
        { "ffn_hidden_size", var(vars, "intermediate_size") },
        { "num_attention_heads", heads },
        { "num_query_groups", groupsKv },
        { "kv_channels", var(vars, "head_dim", heads ? hidden / heads : 0) },
        { "tensor_model_parallel_size", tp },
        { "pipeline_model_parallel_size", pp },
        { "virtual_pipeline_model_parallel_size", vpp > 1 ? nlohmann::json(vpp) : nlohmann::json(nullptr) },
        { "expert_model_parallel_size", ep },
        { "gated_linear_unit", gated },
        { "add_qkv_bias", modelIndex.count("model.layers.0.self_attn.q_proj.bias") > 0 },
        { "params_dtype", "torch." + std::string(torchName(model.tensors.empty() ? DType::BFloat16 : model.tensors.front().dtype)) },
        { "make_vocab_size_divisible_by", options.vocabDivisibleBy },
    };
    if (experts > 0)
        transformer["num_moe_experts"] = experts;
    if (options.firstStageLayers)
        transformer["num_layers_in_first_pipeline_stage"] = *options.firstStageLayers;
    if (options.lastStageLayers)
        transformer["num_layers_in_last_pipeline_stage"] = *options.lastStageLayers;
    if (options.megatronLm && !dist) {
        plan.generatedFiles.emplace_back("latest_checkpointed_iteration.txt",
                                         options.iteration ? std::to_string(*options.iteration) : std::string("release"));
        plan.keystone = "latest_checkpointed_iteration.txt";
        plan.sideFolder = "huggingface";
        plan.runIteration.reset();
    } else {
        plan.generatedFiles.emplace_back("transformer_config.json", transformer.dump(2));
        plan.keystone = "transformer_config.json";
    }
    std::string padded;
    if (auto e = findTensor(lm + "embedding.word_embeddings.weight"))
        padded = ", vocabulary padded to " + std::to_string(megatron[*e].shape[0]);
    plan.layout = std::string(dist ? "Megatron-core torch_dist (verl dist_ckpt)" : options.megatronLm ? "Megatron-LM (model_optim_rng.pt)" : "Megatron-core (verl)") + ", TP " + std::to_string(tp) + " × PP " + std::to_string(pp)
        + (options.firstStageLayers || options.lastStageLayers
               ? " (" + (options.firstStageLayers ? std::to_string(*options.firstStageLayers) + " layers first" : std::string())
                     + (options.firstStageLayers && options.lastStageLayers ? ", " : "")
                     + (options.lastStageLayers ? std::to_string(*options.lastStageLayers) + " layers last" : std::string()) + ")"
               : std::string())
        + (vpp > 1 ? " × VPP " + std::to_string(vpp) : "") + (ep > 1 ? " × EP " + std::to_string(ep) : "") + ", "
        + rules.family + " names" + padded;
    plan.diskBytes += 1u << 20;
    plan.memoryBytes = 2 * plan.largestTensorBytes + (64ull << 20);
}

} // namespace tessera::megatron_plan
