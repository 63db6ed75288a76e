// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_megatron.h"
#include "split/split_megatron_planner.h"

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

namespace megatron_plan {

namespace {

constexpr int kMaxParallel = 4096;

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

} // namespace

std::string inLanguageModel(const std::string& name)
{
    static const std::string prefix = "language_model.";
    return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

std::int64_t var(const ConfigVars& vars, const std::string& name, std::int64_t fallback)
{
    auto it = vars.find(name);
    return it == vars.end() ? fallback : it->second;
}

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
    if (!builtin && options.userRulesFile.empty() && !options.userRulesText)
        return builtin.error().withContext(config->path);
    rules = builtin ? std::move(*builtin) : MappingRuleSet {};
    if (!options.userRulesFile.empty() || options.userRulesText) {
        auto user = applyUserMappingRules(rules, options.userRulesFile, options.userRulesText);
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


} // namespace megatron_plan

Result<SplitPlan> planMegatronSplit(const MergePlan& model, const SplitOptions& options)
{
    return megatron_plan::MegatronPlanner(model, options).run();
}

} // namespace tessera
