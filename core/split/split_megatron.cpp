// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_megatron.h"

#include "formats/megatron_config.h"
#include "formats/megatron_names.h"
#include "io/regex.h"
#include "listed_items.h"
#include "io/printable.h"
#include "merge/box_copy.h"
#include "pickle/pickle_writer.h"
#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping.h"
#include "mapping/megatron_mapping_rules.h"
#include "text_util.h"
#include "formats/layout_registry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace tessera {

namespace {

constexpr int kMaxParallel = 4096;
/// Synthetic byte offsets of the planned Megatron tensors: (tensor, TP rank) in the high bits, the byte inside
/// the rank's local tensor in the low 40 (a terabyte per local tensor).
constexpr int kLocalBits = 40;

using Captures = std::map<std::string, std::string>;

/// A rule template ("model.layers.{layer}.mlp.experts.{expert}.w1.weight") as a regex capturing its fields, named
/// in `fields`; `where` names the rule in the error about a template too long to be a pattern.
Result<Regex> templateRegex(const std::string& text, const std::string& where, std::vector<std::string>& fields)
{
    static const std::string special = ".^$|()[]{}*+?\\";
    std::string pattern;
    for (std::size_t i = 0; i < text.size();) {
        const char* field = nullptr;
        for (const char* name : { "layer", "expert", "block", "param" })
            if (text.compare(i, std::strlen(name) + 2, std::string("{") + name + "}") == 0)
                field = name;
        if (field) {
            fields.emplace_back(field);
            pattern += fields.back() == "param" ? "([A-Za-z][A-Za-z0-9_.]*)" : "([0-9]+)";
            i += fields.back().size() + 2;
            continue;
        }
        if (special.find(text[i]) != std::string::npos)
            pattern += '\\';
        pattern += text[i++];
    }
    return Regex::compile(pattern, where + ": the template '" + text + "' as the regex");
}

std::string instantiate(std::string pattern, const Captures& captures)
{
    for (const auto& [name, value] : captures) {
        const std::string key = "{" + name + "}";
        for (std::size_t at; (at = pattern.find(key)) != std::string::npos;)
            pattern.replace(at, key.size(), value);
    }
    return pattern;
}

/// One planned Megatron tensor (global name, global numbering) and the model tensors it is made of.
struct MegatronTensor {
    std::string name;
    std::size_t rule = 0;
    Captures captures;
    std::vector<std::optional<std::size_t>> parts; ///< model tensor per hf template of the rule
    MappingTransform transform = MappingTransform::Copy;
    DType dtype = DType::Unknown;
    Shape shape;
    MegatronTpSplit split = MegatronTpSplit::Replicated;
    int stage = 0, virtualStage = 0;      ///< pipeline stage and virtual stage holding it
    std::string localName;                ///< the name in its rank file (local layer and expert numbers)
    std::optional<std::int64_t> epRank;   ///< the expert rank holding it; nullopt = every expert rank
    std::optional<std::size_t> copyOf;    ///< a tied output layer: the embedding it copies
};

/// A vision-language model nests its GPT model under `language_model.`; the name inside it.
std::string inLanguageModel(const std::string& name)
{
    static const std::string prefix = "language_model.";
    return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

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

/// What torch_dist needs to know of each layer stack: how many layers it has, and whether they are all alike.
struct LayerStack {
    std::int64_t layers = 0;
    bool homogeneous = true;
};

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

/// A rule's layer_offset under the config (0 when it has none or it cannot be evaluated; the forward mapping of
/// the planned checkpoint reports such a rule).
std::int64_t ruleLayerOffset(const MappingRule& rule, const ConfigVars& vars)
{
    if (rule.layerOffset.empty())
        return 0;
    auto offset = evaluateExpression(rule.layerOffset, vars);
    return offset && *offset >= -kMaxMegatronIndex && *offset <= kMaxMegatronIndex ? *offset : 0;
}

/// Moves the captured {layer} back by a rule's layer_offset: the Megatron number of a Hugging Face layer. False
/// when the layer comes before the offset, so the rule does not apply (a decoder layer is no MTP layer).
bool unoffsetLayer(Captures& captures, std::int64_t offset)
{
    auto it = captures.find("layer");
    if (offset == 0 || it == captures.end())
        return true;
    const std::int64_t layer = it->second.size() > 9 ? -1 : std::stoll(it->second);
    if (layer < offset)
        return false;
    it->second = std::to_string(layer - offset);
    return true;
}

/// The layers one (pipeline stage, virtual stage) model chunk holds: [begin, begin + count) in global numbering.
struct PipelineChunk {
    int stage = 0, virtualStage = 0;
    std::int64_t begin = 0, count = 0;
};

/// Megatron's layer split over PP × VPP chunks, even or with given first/last stage sizes; an empty list and the
/// reasons in `errors` when Megatron would refuse it.
std::vector<PipelineChunk> pipelineChunks(std::int64_t layers, const SplitOptions& options, std::vector<std::string>& errors)
{
    const int pp = options.pp, vpp = options.vpp;
    const auto& first = options.firstStageLayers;
    const auto& last = options.lastStageLayers;
    const std::string layersText = "the " + std::to_string(layers) + " layers (num_hidden_layers)";
    if (layers <= 0) {
        errors.push_back(layersText + " cannot be laid out");
        return {};
    }
    if (first || last) {
        const std::size_t before = errors.size();
        if (pp < 2)
            errors.push_back("uneven pipeline stages (--num_layers_in_first/last_pipeline_stage) need --pp 2 or more");
        if (static_cast<std::int64_t>(pp) * vpp > layers)
            errors.push_back(layersText + " are fewer than the " + std::to_string(static_cast<std::int64_t>(pp) * vpp)
                             + " pipeline chunks (--pp × --vpp)");
        const std::int64_t middleStages = pp - (first ? 1 : 0) - (last ? 1 : 0);
        const std::int64_t middleLayers = layers - first.value_or(0) - last.value_or(0);
        if (middleLayers < 0 || middleStages < 0 || (middleStages == 0 && middleLayers != 0)
            || (middleStages > 0 && middleLayers % middleStages != 0))
            errors.push_back(layersText + " less " + std::to_string(first.value_or(0)) + " on the first and "
                             + std::to_string(last.value_or(0)) + " on the last stage do not split evenly over the "
                             + std::to_string(std::max<std::int64_t>(middleStages, 0)) + " stage(s) between");
        else if (vpp > 1 && (first.value_or(0) % vpp || last.value_or(0) % vpp
                             || (middleStages > 0 && (middleLayers / middleStages) % vpp)))
            errors.push_back("with " + std::to_string(vpp) + " virtual stages, every pipeline stage's layer count "
                             "must be a multiple of " + std::to_string(vpp));
        if (errors.size() != before)
            return {};
    } else if (layers % (static_cast<std::int64_t>(pp) * vpp) != 0) {
        errors.push_back(layersText + " do not split evenly over " + std::to_string(pp) + " pipeline stage(s) × "
                         + std::to_string(vpp) + " virtual stage(s); give the first or last stage's size "
                         "(--num_layers_in_first_pipeline_stage, --num_layers_in_last_pipeline_stage)");
        return {};
    }
    MegatronConfig config;
    config.numLayers.value = layers;
    config.pipelineParallel.value = pp;
    if (vpp > 1)
        config.virtualPipeline.value = vpp;
    config.firstStageLayers.value = first;
    config.lastStageLayers.value = last;
    std::vector<PipelineChunk> chunks;
    for (int vp = 0; vp < vpp; ++vp)
        for (int s = 0; s < pp; ++s)
            chunks.push_back({ s, vp, *megatronLayerOffset(config, s, vp), *megatronStageLayers(config, s, vp) });
    return chunks;
}

std::int64_t var(const ConfigVars& vars, const std::string& name, std::int64_t fallback = 0)
{
    auto it = vars.find(name);
    return it == vars.end() ? fallback : it->second;
}

/// What of the model tensor `source` its mapping back from the planned Megatron checkpoint (`back`) does not
/// carry, as a message; empty when it carries all of it. Rows past config.json's vocab_size are what this is
/// about: Megatron pads the vocabulary itself and a merge keeps vocab_size rows, so any others would be lost.
std::string partLeftOut(const PlannedTensor& source, const TensorInfo& back, const ConfigVars& vars)
{
    if (back.outputShape() == source.shape)
        return {};
    const std::int64_t vocab = var(vars, "vocab_size", -1);
    if (!source.shape.empty() && !back.outputShape().empty() && back.outputShape()[0] == vocab && source.shape[0] > vocab)
        return source.name + " has " + std::to_string(source.shape[0]) + " rows but config.json's vocab_size is "
            + std::to_string(vocab) + ": a Megatron checkpoint keeps vocab_size rows (padded to a multiple of "
            "--make_vocab_size_divisible_by × TP with rows of its own) and a merge gives back vocab_size rows, so "
            "rows " + std::to_string(vocab) + "–" + std::to_string(source.shape[0] - 1) + " would be lost. If they "
            "are tokens of the model, set vocab_size to " + std::to_string(source.shape[0]) + " in config.json; "
            "or split it as FSDP or DCP, which keep every row";
    return source.name + " " + shapeToString(source.shape) + " maps back from the Megatron checkpoint as "
        + shapeToString(back.outputShape()) + ": the rest of it would be lost";
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

/// fragments[mi][r]: what fills rank r's local tensor of megatron[mi].
using RankFragments = std::vector<std::vector<std::vector<SplitFragment>>>;

/// A rule's Hugging Face templates as regexes, with the fields each one captures.
struct CompiledRule {
    std::vector<Regex> hf;
    std::vector<std::vector<std::string>> fields;
};

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

/// planMegatronSplit's steps over the state they share: the options, the model read through the mapping rules,
/// and the planned Megatron tensors each step fills in further. A step adds what it finds wrong to `errors`;
/// fail() makes them the one error the plan returns.
struct MegatronPlanner {
    MegatronPlanner(const MergePlan& m, const SplitOptions& o)
        : model(m), options(o), tp(o.tp), pp(o.pp), vpp(o.vpp), ep(o.ep), dist(o.format == SplitFormat::MegatronDist)
    {
    }

    Result<SplitPlan> run();

    const MergePlan& model;
    const SplitOptions& options;
    const int tp, pp, vpp, ep;
    const bool dist;
    std::vector<std::string> errors;

    MappingRuleSet rules;
    ConfigVars vars;
    std::map<std::string, std::size_t> modelIndex; ///< model tensor name → index
    bool valueModel = false, tied = false;
    std::vector<MegatronTensor> megatron;
    std::map<std::pair<std::size_t, Captures>, std::size_t> groups; ///< (rule, captures) → its Megatron tensor
    bool gated = false;
    std::string lm;                    ///< "language_model." in a vision-language model
    std::int64_t layers = 0, experts = 0, groupsKv = 0;
    std::vector<PipelineChunk> chunks;
    std::vector<Shape> localShapes;    ///< per Megatron tensor: its shape on one TP rank
    RankFragments fragments;

private:
    Error fail();
    void checkOptions();
    Status loadRules();
    Result<std::vector<CompiledRule>> compileRules() const;
    Status readModelBackwards();
    bool matchTensor(std::size_t i, const std::vector<CompiledRule>& compiled);
    std::vector<Captures> eachExpert(std::size_t r, std::size_t i, const Captures& captures);
    void chooseSpellings();
    Status renameUnstackedLayers();
    void globalShapes();
    void globalShape(MegatronTensor& t, std::int64_t vocabPad);
    std::optional<std::size_t> findTensor(const std::string& name) const;
    void addTiedOutputLayer();
    void placeTensors();
    void splitOverTp(MegatronTensor& t);
    void placeOnStage(MegatronTensor& t);
    const PipelineChunk* chunkOf(std::int64_t layer) const;
    std::string onExpertRank(MegatronTensor& t, const std::string& rest);
    CheckpointInfo plannedCheckpoint();
    TensorInfo plannedTensor(std::size_t mi, const std::string& root) const;
    Result<MappingResult> mapBack(const CheckpointInfo& planned);
    Status collectFragments(const MappingResult& mapped);
    void addFragments(const TensorInfo& h, std::size_t source);
    SplitPlan planFiles() const;
    void planDistFiles(SplitPlan& plan, const std::vector<std::size_t>& order) const;
    std::map<std::string, LayerStack> layerStacks() const;
    void addDistItems(SplitFile& file, std::size_t mi, int r, const std::map<std::string, LayerStack>& stacks) const;
    void planRankFiles(SplitPlan& plan, const std::vector<std::size_t>& order) const;
    SplitFile rankFile(int s, int e, int r, const std::vector<std::size_t>& order, const std::string& iterationFolder,
                       const std::string& megatronLmItems) const;
    void describePlan(SplitPlan& plan) const;
};

Result<SplitPlan> MegatronPlanner::run()
{
    checkOptions();
    if (!errors.empty())
        return fail();
    TESSERA_TRY(loadRules());
    TESSERA_TRY(readModelBackwards());
    chooseSpellings();
    TESSERA_TRY(renameUnstackedLayers());
    globalShapes();
    if (!errors.empty())
        return fail();
    addTiedOutputLayer();
    placeTensors();
    if (!errors.empty())
        return fail();
    const CheckpointInfo planned = plannedCheckpoint();
    auto mapped = mapBack(planned);
    TESSERA_TRY(mapped);
    TESSERA_TRY(collectFragments(*mapped));
    SplitPlan plan = planFiles();
    describePlan(plan);
    return plan;
}

/// The errors found so far as the plan's one error.
Error MegatronPlanner::fail()
{
    // One line per reason: a rule broken in every layer says so once.
    std::vector<std::string> unique;
    for (const auto& e : errors)
        if (std::find(unique.begin(), unique.end(), e) == unique.end())
            unique.push_back(e);
    errors = std::move(unique);
    return makeError("cannot lay the model out as Megatron TP " + std::to_string(tp) + " × PP " + std::to_string(pp)
                     + (vpp > 1 ? " × VPP " + std::to_string(vpp) : "") + (ep > 1 ? " × EP " + std::to_string(ep) : "")
                     + ":" + listedItems(errors, 12));
}

/// The parallel sizes and flags Megatron accepts, and the config.json its names and sizes come from.
void MegatronPlanner::checkOptions()
{
    for (auto [value, flag] : { std::pair { tp, "--tp" }, { pp, "--pp" }, { vpp, "--vpp" }, { ep, "--ep" } })
        if (value < 1 || value > kMaxParallel)
            errors.push_back(std::string(flag) + " must be between 1 and " + std::to_string(kMaxParallel));
    if (vpp > 1 && pp < 2)
        errors.push_back("virtual pipeline stages (--vpp " + std::to_string(vpp) + ") need --pp 2 or more");
    if (dist && (vpp > 1 || ep > 1))
        errors.push_back("--format megatron-dist writes TP × PP layouts (virtual pipeline stages and expert ranks "
                         "only change who saves which chunk there); give --tp and --pp");
    if (dist && options.megatronLm)
        errors.push_back("--flavor megatron-lm is a layout of --format megatron");
    if (options.iteration && (*options.iteration < 0 || *options.iteration > 9'999'999))
        errors.push_back("--iteration must be between 0 and 9999999");
    if (options.vocabDivisibleBy < 1)
        errors.push_back("--make_vocab_size_divisible_by must be positive");
    if (model.config.path.empty())
        errors.push_back("no config.json was found for the model; Megatron names and sizes come from it (give "
                         "--hf_model_path)");
}

/// The model's config.json, the mapping rules of its family (with the user's), and the config's variables.
Status MegatronPlanner::loadRules()
{
    auto config = readHfModelConfig(model.config.path);
    TESSERA_TRY(config);
    auto builtin = selectMappingRules(config->architectures, config->modelType);
    if (!builtin && options.userRulesFile.empty())
        return builtin.error().withContext(config->path);
    rules = builtin ? std::move(*builtin) : MappingRuleSet {};
    if (!options.userRulesFile.empty()) {
        auto user = applyUserMappingRules(rules, options.userRulesFile);
        TESSERA_TRY(user);
        rules = std::move(*user);
    }
    for (std::size_t i = 0; i < model.tensors.size(); ++i)
        modelIndex.emplace(model.tensors[i].name, i);
    valueModel = modelIndex.count("score.weight") && !modelIndex.count("lm_head.weight");
    auto resolved = resolveConfigVars(*config, rules, { { "value_model", valueModel ? 1 : 0 } });
    TESSERA_TRY(resolved);
    vars = std::move(*resolved);
    tied = var(vars, "tie_word_embeddings") != 0;
    return Status::success();
}

Result<std::vector<CompiledRule>> MegatronPlanner::compileRules() const
{
    std::vector<CompiledRule> compiled;
    for (const auto& rule : rules.rules) {
        CompiledRule c;
        for (const auto& t : rule.hf) {
            c.fields.emplace_back();
            auto regex = templateRegex(t, rule.origin + ": rule '" + rule.id + "'", c.fields.back());
            TESSERA_TRY(regex);
            c.hf.push_back(std::move(*regex));
        }
        compiled.push_back(std::move(c));
    }
    return compiled;
}

/// The model's tensors read backwards through the rules: which Megatron tensor each one is part of.
Status MegatronPlanner::readModelBackwards()
{
    auto compiled = compileRules();
    TESSERA_TRY(compiled);
    std::vector<std::string> unmatched;
    for (std::size_t i = 0; i < model.tensors.size(); ++i)
        if (!matchTensor(i, *compiled))
            unmatched.push_back(printableText(model.tensors[i].name));
    if (!unmatched.empty())
        errors.push_back("no rule of the " + rules.family + " family gives these tensors a Megatron name (add one "
                         "with --param_mapping):" + listedItems(unmatched, 6));
    return Status::success();
}

/// Makes model tensor i a part of the Megatron tensor(s) of the first rule template it matches; false when none.
bool MegatronPlanner::matchTensor(std::size_t i, const std::vector<CompiledRule>& compiled)
{
    const std::string& name = model.tensors[i].name;
    for (std::size_t r = 0; r < rules.rules.size(); ++r) {
        if (rules.rules[r].megatron.empty())
            continue;
        for (std::size_t k = 0; k < compiled[r].hf.size(); ++k) {
            std::vector<std::string> m;
            if (!compiled[r].hf[k].fullMatch(name, m))
                continue;
            Captures captures;
            for (std::size_t f = 0; f < compiled[r].fields[k].size(); ++f)
                captures[compiled[r].fields[k][f]] = m[f];
            if (!unoffsetLayer(captures, ruleLayerOffset(rules.rules[r], vars)))
                continue;
            for (const Captures& c : eachExpert(r, i, captures)) {
                auto [it, inserted] = groups.emplace(std::make_pair(r, c), megatron.size());
                if (inserted) {
                    MegatronTensor t;
                    t.rule = r;
                    t.captures = c;
                    t.parts.assign(rules.rules[r].hf.size(), std::nullopt);
                    t.transform = rules.rules[r].transform;
                    megatron.push_back(std::move(t));
                }
                megatron[it->second].parts[k] = i;
            }
            return true;
        }
    }
    return false;
}

/// A tensor of all the experts (stack_experts) is one Megatron tensor per entry of its leading axis: the captures
/// of each; other tensors are one Megatron tensor.
std::vector<Captures> MegatronPlanner::eachExpert(std::size_t r, std::size_t i, const Captures& captures)
{
    std::vector<Captures> each { captures };
    if (rules.rules[r].transform == MappingTransform::StackExperts) {
        const Shape& whole = model.tensors[i].shape;
        const std::int64_t count = whole.empty() ? 0 : whole[0];
        if (count <= 0 || count > kMaxMegatronIndex)
            errors.push_back(printableText(model.tensors[i].name) + " " + shapeToString(whole)
                             + " has no axis of experts to split");
        each.clear();
        for (std::int64_t e = 0; e < count && count <= kMaxMegatronIndex; ++e) {
            each.push_back(captures);
            each.back()["expert"] = std::to_string(e);
        }
    }
    return each;
}

/// The Megatron spelling: the first alternative, except a Transformer Engine fused norm
/// (`X.layer_norm_weight`) where the linear X it is fused into does not exist (MoE layers: pre_mlp_layernorm).
void MegatronPlanner::chooseSpellings()
{
    std::set<std::string> firstNames;
    for (const auto& t : megatron)
        firstNames.insert(instantiate(rules.rules[t.rule].megatron.front(), t.captures));
    for (auto& t : megatron) {
        const auto& alternatives = rules.rules[t.rule].megatron;
        t.name = instantiate(alternatives.front(), t.captures);
        for (const auto& alt : alternatives) {
            const std::string name = instantiate(alt, t.captures);
            std::string host;
            for (const char* fused : { ".layer_norm_weight", ".layer_norm_bias" })
                if (endsWith(name, fused))
                    host = name.substr(0, name.size() - std::string(fused).size()) + ".weight";
            if (host.empty() || firstNames.count(host)) {
                t.name = name;
                break;
            }
        }
    }
}

/// Renamed layers read backwards: a decoder layer past the decoder's own is a multi-token-prediction layer.
Status MegatronPlanner::renameUnstackedLayers()
{
    for (const auto& rename : rules.unstack) {
        if (rename.transform != MappingTransform::Rename || rename.megatron.empty())
            continue;
        std::vector<std::string> fields;
        const auto as = templateRegex(rename.hf.front(), rename.origin + ": rule '" + rename.id + "'", fields);
        TESSERA_TRY(as);
        const std::int64_t offset = ruleLayerOffset(rename, vars);
        for (auto& t : megatron) {
            std::vector<std::string> m;
            if (!as->fullMatch(t.name, m))
                continue;
            Captures captures;
            for (std::size_t f = 0; f < fields.size(); ++f)
                captures[fields[f]] = m[f];
            if (unoffsetLayer(captures, offset) && offset != 0)
                t.name = instantiate(rename.megatron.front(), captures);
        }
    }
    return Status::success();
}

/// Global shapes, from the parts.
void MegatronPlanner::globalShapes()
{
    const std::int64_t vocabPad = static_cast<std::int64_t>(options.vocabDivisibleBy) * tp;
    for (auto& t : megatron)
        globalShape(t, vocabPad);
}

/// Megatron tensor t's dtype and global shape, from its parts; notes whether the MLP is gated.
void MegatronPlanner::globalShape(MegatronTensor& t, std::int64_t vocabPad)
{
    std::vector<std::string> missing;
    for (std::size_t k = 0; k < t.parts.size(); ++k)
        if (!t.parts[k])
            missing.push_back(printableText(instantiate(rules.rules[t.rule].hf[k], t.captures)));
    if (!missing.empty()) {
        errors.push_back(printableText(t.name) + " needs every part it fuses; missing:" + listedItems(missing, 6));
        return;
    }
    const PlannedTensor& first = model.tensors[*t.parts.front()];
    t.dtype = first.dtype;
    t.shape = first.shape;
    for (std::size_t k = 1; k < t.parts.size(); ++k) {
        const PlannedTensor& part = model.tensors[*t.parts[k]];
        if (part.dtype != t.dtype || part.shape.size() != t.shape.size() || t.shape.empty()
            || !std::equal(part.shape.begin() + 1, part.shape.end(), t.shape.begin() + 1)) {
            errors.push_back(printableText(t.name) + ": its parts differ in dtype or trailing dims ("
                             + printableText(first.name) + " " + shapeToString(first.shape) + ", "
                             + printableText(part.name) + " " + shapeToString(part.shape) + ")");
            break;
        }
        t.shape[0] += part.shape[0];
    }
    if (t.transform == MappingTransform::TrimVocab && !t.shape.empty())
        t.shape[0] = (t.shape[0] + vocabPad - 1) / vocabPad * vocabPad;
    const MappingRule& rule = rules.rules[t.rule];
    if (t.transform == MappingTransform::StackExperts) {
        // One expert's Megatron tensor: an entry of the leading axis, transposed back if the rule transposes.
        t.shape.erase(t.shape.begin());
        if (rule.transpose && t.shape.size() == 2)
            std::swap(t.shape[0], t.shape[1]);
        else if (rule.transpose)
            errors.push_back(printableText(first.name) + " " + shapeToString(first.shape) + ": rule " + rule.id
                             + " transposes each expert, which needs [experts, rows, columns]");
        if (rule.interleaveGateUp && (t.shape.empty() || t.shape[0] % 2 != 0))
            errors.push_back(printableText(first.name) + " " + shapeToString(first.shape) + ": rule " + rule.id
                             + " interleaves gate and up, which needs an even number of them");
    }
    gated |= t.transform == MappingTransform::SplitGateUp || rule.interleaveGateUp;
}

std::optional<std::size_t> MegatronPlanner::findTensor(const std::string& name) const
{
    for (std::size_t i = 0; i < megatron.size(); ++i)
        if (megatron[i].name == name)
            return i;
    return std::nullopt;
}

/// Tied embeddings: a pipeline's last stage keeps its own copy of the embedding as output_layer.weight.
void MegatronPlanner::addTiedOutputLayer()
{
    // (torch_dist saves it as a replica of the embedding, that is not at all.)
    lm = findTensor("language_model.embedding.word_embeddings.weight") ? "language_model." : "";
    if (tied && pp > 1 && !dist && !findTensor(lm + "output_layer.weight"))
        if (auto embedding = findTensor(lm + "embedding.word_embeddings.weight")) {
            MegatronTensor head = megatron[*embedding];
            head.name = lm + "output_layer.weight";
            head.copyOf = *embedding;
            megatron.push_back(std::move(head));
        }
}

/// Where each tensor lives: TP split, pipeline and virtual stage, expert rank, local name.
void MegatronPlanner::placeTensors()
{
    layers = var(vars, "num_hidden_layers");
    chunks = pipelineChunks(layers, options, errors);
    if (auto range = rules.ranges.find("expert"); range != rules.ranges.end())
        if (auto n = evaluateExpression(range->second, vars))
            experts = *n;
    groupsKv = var(vars, "num_key_value_heads", var(vars, "num_attention_heads"));
    for (auto& t : megatron) {
        splitOverTp(t);
        placeOnStage(t);
    }
    if (ep > 1 && experts <= 0)
        errors.push_back("--ep " + std::to_string(ep) + " needs a mixture-of-experts model; this one has no experts");
}

/// How TP splits t, and whether its sizes (and a fused QKV's key/value heads) split evenly.
void MegatronPlanner::splitOverTp(MegatronTensor& t)
{
    t.split = megatronTpSplit(t.name, gated);
    if (inLanguageModel(t.name) == "output_layer.weight" && t.shape.size() == 2 && t.shape[0] == 1)
        t.split = MegatronTpSplit::Replicated; // a value head (LinearForLastLayer)
    const auto dimOf = [&]() -> std::size_t { return t.split == MegatronTpSplit::Columns ? 1 : 0; };
    if (t.split != MegatronTpSplit::Replicated) {
        const std::size_t d = dimOf();
        const std::int64_t unit = t.split == MegatronTpSplit::GluRows ? 2 * tp : tp;
        if (t.shape.size() <= d || t.shape[d] % unit != 0)
            errors.push_back(printableText(t.name) + " " + shapeToString(t.shape) + ": dim " + std::to_string(d)
                             + " does not split evenly over TP " + std::to_string(tp));
    }
    if (t.transform == MappingTransform::SplitQkv && groupsKv % tp != 0)
        errors.push_back("TP " + std::to_string(tp) + " does not divide the " + std::to_string(groupsKv)
                         + " key/value heads: Megatron keeps each query group whole on one rank");
}

/// The pipeline and virtual stage holding t, and its name there (local layer and expert numbers).
void MegatronPlanner::placeOnStage(MegatronTensor& t)
{
    t.localName = t.name;
    if (auto layer = parseMegatronLayerName(t.name)) {
        const PipelineChunk* chunk = chunkOf(layer->layer);
        if (!chunk) {
            if (!chunks.empty())
                errors.push_back(printableText(t.name) + ": layer " + std::to_string(layer->layer) + " is past the "
                                 + std::to_string(layers) + " layers of num_hidden_layers");
            return;
        }
        t.stage = chunk->stage;
        t.virtualStage = chunk->virtualStage;
        t.localName = layer->prefix + std::to_string(layer->layer - chunk->begin) + "." + onExpertRank(t, layer->rest);
    } else if (auto mtp = parseMegatronMtpName(t.name)) {
        // Megatron builds the MTP layers on the last (virtual) stage, after the decoder.
        t.stage = pp - 1;
        t.virtualStage = vpp - 1;
        t.localName = mtp->prefix + onExpertRank(t, mtp->rest);
    } else if (inLanguageModel(t.name).rfind("decoder.final_layernorm", 0) == 0
               || inLanguageModel(t.name).rfind("output_layer", 0) == 0) {
        t.stage = pp - 1;
        t.virtualStage = vpp - 1;
    }
}

const PipelineChunk* MegatronPlanner::chunkOf(std::int64_t layer) const
{
    for (const auto& c : chunks)
        if (layer >= c.begin && layer < c.begin + c.count)
            return &c;
    return nullptr;
}

/// A routed expert goes to the expert rank holding it, under its local number there; `rest` is its name inside
/// its layer, returned with that number.
std::string MegatronPlanner::onExpertRank(MegatronTensor& t, const std::string& rest)
{
    auto e = parseMegatronExpertName(rest);
    if (!e)
        return rest;
    if (experts <= 0 || experts % ep != 0) {
        errors.push_back("the " + std::to_string(experts) + " experts do not split evenly over EP " + std::to_string(ep));
        return rest;
    }
    const std::int64_t per = experts / ep;
    t.epRank = e->expert / per;
    return e->before + std::to_string(e->expert % per) + e->after;
}

/// The planned checkpoint as the reader would describe it, with synthetic offsets, mapped exactly as a
/// merge maps it: each mapped piece is a box of a model tensor inside one rank's local tensor.
CheckpointInfo MegatronPlanner::plannedCheckpoint()
{
    CheckpointInfo planned;
    planned.layout = layout_names::kMegatronLegacy;
    planned.root = "(planned split)";
    planned.hfConfigDir = model.config.path;
    planned.parallel.tensorParallel = tp;
    planned.parallel.pipelineParallel = pp;
    planned.parallel.virtualPipeline = vpp;
    planned.parallel.expertParallel = ep;
    planned.parallel.worldSize = tp * pp * ep;
    planned.notes["num_layers"] = std::to_string(layers);
    localShapes.assign(megatron.size(), Shape {});
    for (std::size_t mi = 0; mi < megatron.size(); ++mi) {
        const MegatronTensor& m = megatron[mi];
        Shape local = m.shape;
        if (m.split == MegatronTpSplit::Columns)
            local[1] /= tp;
        else if (m.split != MegatronTpSplit::Replicated)
            local[0] /= tp;
        localShapes[mi] = local;
        if (m.copyOf)
            continue; // mapped as the embedding it copies
        planned.tensors.push_back(plannedTensor(mi, planned.root));
    }
    return planned;
}

/// megatron[mi] as the reader would describe it: a piece per box each TP rank holds, its bytes at
/// (mi, rank) << kLocalBits in the file `root`.
TensorInfo MegatronPlanner::plannedTensor(std::size_t mi, const std::string& root) const
{
    const MegatronTensor& m = megatron[mi];
    const Shape& local = localShapes[mi];
    TensorInfo t;
    t.name = m.name;
    t.dtype = m.dtype;
    t.shape = m.shape;
    const std::size_t esize = dtypeSize(m.dtype);
    const Shape strides = globalStrides(local);
    std::uint64_t rowBytes = esize;
    for (std::size_t d = 1; d < local.size(); ++d)
        rowBytes *= static_cast<std::uint64_t>(local[d]);
    const int holders = m.split == MegatronTpSplit::Replicated ? 1 : tp;
    for (int r = 0; r < holders; ++r) {
        const std::uint64_t base = (static_cast<std::uint64_t>(mi) * static_cast<std::uint64_t>(tp) + r) << kLocalBits;
        auto piece = [&](Shape offsets, Shape box, std::uint64_t byteOffset) {
            Piece p;
            p.file = root;
            p.rank = r;
            p.offsets = std::move(offsets);
            p.shape = std::move(box);
            p.strides = strides;
            p.storedDtype = m.dtype;
            p.dataOffset = base + byteOffset;
            p.storageBegin = base;
            p.storageBytes = rowBytes * static_cast<std::uint64_t>(local.empty() ? 1 : local[0]);
            t.pieces.push_back(std::move(p));
        };
        Shape offsets(local.size(), 0);
        switch (m.split) {
        case MegatronTpSplit::Replicated:
            piece(offsets, local, 0);
            break;
        case MegatronTpSplit::Rows:
            offsets[0] = r * local[0];
            piece(offsets, local, 0);
            break;
        case MegatronTpSplit::Columns:
            offsets[1] = r * local[1];
            piece(offsets, local, 0);
            break;
        case MegatronTpSplit::GluRows: {
            const std::int64_t half = local[0] / 2;
            Shape box = local;
            box[0] = half;
            offsets[0] = r * half;
            piece(offsets, box, 0);
            offsets[0] = tp * half + r * half;
            piece(offsets, box, static_cast<std::uint64_t>(half) * rowBytes);
            break;
        }
        }
    }
    return t;
}

/// The planned checkpoint mapped back to the model by the forward mapping; an error unless every row maps.
Result<MappingResult> MegatronPlanner::mapBack(const CheckpointInfo& planned)
{
    MappingOptions mappingOptions;
    mappingOptions.configDir = model.config.path;
    mappingOptions.userRulesFile = options.userRulesFile;
    mappingOptions.valueModel = valueModel;
    auto mapped = mapMegatronToHf(planned, mappingOptions);
    TESSERA_TRY(mapped);
    for (const auto& row : mapped->rows)
        if (row.status != MappingStatus::Ok && row.status != MappingStatus::Tied)
            errors.push_back(printableText(row.source.empty() ? row.target : row.source) + ": "
                             + mappingStatusName(row.status)
                             + (row.detail.empty() ? "" : " (" + row.detail + ")"));
    for (const auto& p : mapped->problems)
        errors.push_back(p.text());
    if (!errors.empty()) {
        errors.insert(errors.begin(), "the planned Megatron checkpoint does not map back to the model:");
        return fail();
    }
    return mapped;
}

/// What fills each rank's local tensors, from the mapped pieces; an error when a model tensor would not be written
/// whole.
Status MegatronPlanner::collectFragments(const MappingResult& mapped)
{
    fragments.assign(megatron.size(), std::vector<std::vector<SplitFragment>>(tp));
    std::set<std::size_t> covered;
    for (const TensorInfo& h : mapped.mapped.tensors) {
        auto it = modelIndex.find(h.name);
        if (it == modelIndex.end())
            continue; // e.g. a tied head the merge drops
        // Only what maps back is written: a tensor that maps back smaller would lose the rest, silently zeroed.
        if (const std::string lost = partLeftOut(model.tensors[it->second], h, vars); !lost.empty()) {
            errors.push_back(lost);
            continue;
        }
        covered.insert(it->second);
        addFragments(h, it->second);
    }
    if (!errors.empty())
        return fail();
    std::vector<std::string> uncovered;
    for (std::size_t i = 0; i < model.tensors.size(); ++i)
        if (!covered.count(i) && !(tied && model.tensors[i].name == "lm_head.weight"))
            uncovered.push_back(printableText(model.tensors[i].name));
    if (!uncovered.empty()) {
        errors.push_back("these tensors would not be written:" + listedItems(uncovered, 6));
        return fail();
    }
    for (std::size_t mi = 0; mi < megatron.size(); ++mi) {
        if (megatron[mi].copyOf)
            fragments[mi] = fragments[*megatron[mi].copyOf];
        if (megatron[mi].split == MegatronTpSplit::Replicated)
            for (int r = 1; r < tp; ++r)
                fragments[mi][static_cast<std::size_t>(r)] = fragments[mi][0];
    }
    return Status::success();
}

/// The pieces of mapped tensor h (model tensor `source`) as fragments of the local tensors their synthetic
/// offsets name.
void MegatronPlanner::addFragments(const TensorInfo& h, std::size_t source)
{
    const std::size_t esize = dtypeSize(h.dtype);
    for (const Piece& p : h.pieces) {
        const std::uint64_t key = p.dataOffset >> kLocalBits;
        const std::size_t mi = static_cast<std::size_t>(key / static_cast<std::uint64_t>(tp));
        const std::size_t r = static_cast<std::size_t>(key % static_cast<std::uint64_t>(tp));
        SplitFragment f;
        f.source = source;
        f.sourceOffsets = p.offsets;
        f.shape = p.shape;
        f.localElement = (p.dataOffset & ((std::uint64_t(1) << kLocalBits) - 1)) / esize;
        f.localStrides = p.strides;
        if (!h.savedShape.empty())
            f.sourceBoxShape = h.shape;
        fragments[mi][r].push_back(std::move(f));
    }
}

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
        stack.homogeneous = static_cast<std::int64_t>(params.size()) == stack.layers
            && std::all_of(params.begin(), params.end(), [&](const auto& l) { return l.second == params.begin()->second; });
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

} // namespace

Result<SplitPlan> planMegatronSplit(const MergePlan& model, const SplitOptions& options)
{
    return MegatronPlanner(model, options).run();
}

} // namespace tessera
