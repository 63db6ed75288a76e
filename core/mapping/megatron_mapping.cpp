// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/megatron_mapping.h"
#include "io/printable.h"

#include "formats/megatron_names.h"
#include "io/regex.h"
#include "mapping/expert_stacks.h"
#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping_rules.h"
#include "mapping/megatron_rule_patterns.h"
#include "mapping/megatron_transforms.h"
#include "model/tensor_reindex.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace tessera {

using namespace mapping_internal; // the compiled rules and transforms this file's mapping is made of

namespace {

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

/// The head: a value model's output_layer has one row (LinearForLastLayer), whatever the vocabulary. Layers past
/// the decoder's (multi-token prediction) are expected only when the checkpoint has them. Returns config.json's
/// values with those settled; sets the result's valueModel, tiedEmbeddings and the MTP warning.
Result<ConfigVars> resolveMappingVars(const CheckpointInfo& source, const MappingOptions& options,
                                      const HfModelConfig& config, const MappingRuleSet& set, MappingResult& result)
{
    ConfigVars overrides;
    bool valueModel = options.valueModel.value_or(false);
    if (!options.valueModel)
        if (const TensorInfo* head = source.find("output_layer.weight"))
            valueModel = head->shape.size() == 2 && head->shape[0] == 1
                && config.values.count("vocab_size") && config.values.at("vocab_size") != 1;
    overrides["value_model"] = valueModel ? 1 : 0;
    if (options.tieWordEmbeddings)
        overrides["tie_word_embeddings"] = 1;
    // Layers past the decoder's (multi-token prediction: the rules that carry a layer_offset) are expected only
    // when the checkpoint has them: most runs train without MTP under a config.json that describes it.
    auto hasMtp = sourceHasOffsetLayers(source, set);
    TESSERA_TRY(hasMtp);
    overrides["has_mtp"] = *hasMtp ? 1 : 0;
    auto vars = resolveConfigVars(config, set, overrides);
    TESSERA_TRY(vars);
    if (!*hasMtp && vars->count("num_nextn_predict_layers") && vars->at("num_nextn_predict_layers") > 0)
        result.warnings.push_back("config.json gives num_nextn_predict_layers "
                                  + std::to_string(vars->at("num_nextn_predict_layers"))
                                  + " but the checkpoint holds no multi-token-prediction layer (mtp.layers.*): the "
                                    "model is written without it, which transformers loads as it is (it skips MTP "
                                    "weights); vLLM's MTP speculative decoding needs a checkpoint trained with MTP");
    result.valueModel = valueModel;
    result.tiedEmbeddings = vars->count("tie_word_embeddings") && vars->at("tie_word_embeddings") != 0;
    return vars;
}

/// The first rule one of whose Megatron patterns matches `name`, with what the pattern captured; null when none.
const CompiledRule* findRule(const std::vector<CompiledRule>& rules, const std::string& name, Captures& captures)
{
    for (const auto& r : rules)
        for (const auto& p : r.megatron)
            if (auto c = matchPattern(p, name)) {
                captures = std::move(*c);
                return &r;
            }
    return nullptr;
}

/// What every step of one mapping reads: the checkpoint, its config and rules, and the parameters they expect.
struct MappingInputs {
    const CheckpointInfo& source;
    const MappingRuleSet& set;
    const HfModelConfig& config;
    const ConfigVars& vars;
    const std::vector<ExpectedParameter>& expected;
    const std::unordered_map<std::string, std::size_t>& expectedIndex; ///< name → index into expected
    const std::vector<CompiledRule>& mapRules;
    const std::optional<Regex>& ignore; ///< --ignore_missing_params

    /// True when --ignore_missing_params covers `name`.
    bool ignored(const std::string& name) const { return ignore && ignore->search(name); }
};

/// Builds one mapping's table and tensors, item by item, then the rows for what nothing filled, the problems and
/// the mapped checkpoint. Its methods are the steps of mapMegatronToHf(); they share the tensors produced so far.
class MappingBuilder {
public:
    MappingBuilder(const MappingInputs& in, MappingResult& result) : m_in(in), m_result(result) { }

    void mapItem(const Item& item);
    void dropIncompleteStacks();
    void addUnfilledExpected();
    void collectProblems(bool strict);
    void buildMapped(const std::string& configDir);

private:
    struct Produced {
        std::size_t row;
        TensorInfo tensor;
        bool dropped = false; ///< a stacked target with experts no source fills: not written
    };

    void addLoraFactorRows(const CompiledRule& rule, const Item& item, const MegatronAdapterName& adapter,
                           const Captures& captures, MappingRow base);
    void checkOutput(MappingRow& row, const Output& o, const CompiledRule& rule, const Item& item) const;
    void addOutput(const CompiledRule& rule, const Item& item, const MappingRow& base, Output& o);
    void addStackedExpert(const CompiledRule& rule, Output& o, std::size_t rowIndex, std::size_t producedIndex,
                          bool inserted);

    const MappingInputs& m_in;
    MappingResult& m_result;
    std::vector<Produced> m_produced;
    std::unordered_map<std::string, std::size_t> m_byTarget; // target → index into m_produced
    ExpertStacks m_stacks;
};

/// Maps one source item: a row per target it fills (or one row saying why it fills none).
void MappingBuilder::mapItem(const Item& item)
{
    MappingRow base;
    base.source = item.label;
    base.sourceShape = item.sourceShape;
    // A LoRA factor maps through the rule of the weight it adapts (see mapLoraFactor()).
    const auto adapter = parseMegatronAdapterName(item.name);
    const std::string& ruleName = adapter ? adapter->weight : item.name;
    Captures captures;
    const CompiledRule* rule = findRule(m_in.mapRules, ruleName, captures);
    if (!rule) {
        base.transform = item.chain;
        base.status = m_in.ignored(item.name) ? MappingStatus::Ignored : MappingStatus::Unmapped;
        base.detail = base.status == MappingStatus::Ignored
            ? "no rule maps it; --ignore_missing_params covers it, so it is not written"
            : "no " + m_in.set.family + " rule maps " + item.name
                  + "; add a rule with --param_mapping, or leave it out with --ignore_missing_params";
        m_result.rows.push_back(std::move(base));
        return;
    }
    captures = offsetLayer(std::move(captures), rule->layerOffset);
    base.rule = rule->rule->id;
    base.ruleOrigin = rule->rule->origin;
    base.transform = (item.chain.empty() ? "" : item.chain + " + ") + mappingTransformText(*rule->rule);
    if (adapter) {
        addLoraFactorRows(*rule, item, *adapter, captures, std::move(base));
        return;
    }
    auto outputs = applyTransform(*rule, item, captures, m_in.vars, m_in.source, m_result.warnings);
    if (!outputs) {
        base.status = MappingStatus::ShapeMismatch;
        base.target = render(rule->rule->hf.front(), captures);
        base.detail = item.name + " " + shapeToString(item.tensor.shape) + " " + outputs.error().message;
        m_result.rows.push_back(std::move(base));
        return;
    }
    for (auto& o : *outputs)
        addOutput(*rule, item, base, o);
}

/// A LoRA factor's rows: one per PEFT factor it becomes, each produced (the first time its name is seen).
void MappingBuilder::addLoraFactorRows(const CompiledRule& rule, const Item& item, const MegatronAdapterName& adapter,
                                       const Captures& captures, MappingRow base)
{
    auto factors = mapLoraFactor(rule, item, adapter, captures, m_in.vars, m_in.source, m_result.warnings);
    if (!factors) {
        base.status = MappingStatus::ShapeMismatch;
        base.detail = item.name + " " + shapeToString(item.tensor.shape) + " " + factors.error().message;
        m_result.rows.push_back(std::move(base));
        return;
    }
    base.transform += adapter.isA ? " (LoRA A, one copy per target)" : " (LoRA B)";
    for (auto& o : *factors) {
        MappingRow row = base;
        row.target = o.name;
        row.targetShape = o.tensor.shape;
        row.detail = "a LoRA factor: the merge fuses it into the weight it adapts and writes it to the "
                     "adapter folder";
        const std::size_t rowIndex = m_result.rows.size();
        m_result.rows.push_back(std::move(row));
        if (m_byTarget.emplace(o.name, m_produced.size()).second)
            m_produced.push_back({ rowIndex, std::move(o.tensor) });
    }
}

/// An output against what config.json expects: its shape (with a tensor-parallel hint), a tied lm_head, or a
/// name the model does not have.
void MappingBuilder::checkOutput(MappingRow& row, const Output& o, const CompiledRule& rule, const Item& item) const
{
    const Shape& shape = row.targetShape;
    auto e = m_in.expectedIndex.find(o.name);
    if (e != m_in.expectedIndex.end()) {
        const ExpectedParameter& p = m_in.expected[e->second];
        row.expectedShape = p.shape;
        if (p.shape != shape) {
            row.status = MappingStatus::ShapeMismatch;
            row.detail = "is " + shapeToString(shape) + " but config.json gives " + shapeToString(p.shape)
                + " " + p.shapeText;
            for (std::size_t d = 0; d < p.shape.size() && d < shape.size(); ++d)
                if (p.shape[d] != shape[d]) {
                    row.detail += tpHint(shape[d], p.shape[d], m_in.source);
                    break;
                }
        }
    } else if (o.name == "lm_head.weight" && m_result.tiedEmbeddings) {
        row.status = MappingStatus::Tied;
        row.detail = "the embeddings are tied, so the merge drops it after checking it equals "
                     "model.embed_tokens.weight";
    } else {
        row.status = m_in.ignored(o.name) ? MappingStatus::Ignored : MappingStatus::Unexpected;
        const bool mtp = rule.layerOffset != 0 || item.chain.rfind("rename", 0) == 0;
        row.detail = row.status == MappingStatus::Ignored
            ? "not a parameter of this model; --ignore_missing_params covers it, so it is not written"
            : mtp ? "a multi-token-prediction layer's tensor, but " + m_in.config.path
                        + " gives no MTP layer (num_nextn_predict_layers); set it there to write the "
                          "layer, or leave it out with --ignore_missing_params"
                  : "not a parameter of " + m_in.set.family + " under " + m_in.config.path
                        + " (an option such as attention_bias or tie_word_embeddings may be wrong there)";
    }
}

/// One output of a rule: its row, and its tensor unless it is refused, ignored or written already (a duplicate).
void MappingBuilder::addOutput(const CompiledRule& rule, const Item& item, const MappingRow& base, Output& o)
{
    MappingRow row = base;
    row.target = o.name;
    row.targetShape = o.tensor.outputShape();
    checkOutput(row, o, rule, item);
    const std::size_t rowIndex = m_result.rows.size();
    m_result.rows.push_back(std::move(row));
    if (m_result.rows.back().status == MappingStatus::ShapeMismatch
        || m_result.rows.back().status == MappingStatus::Ignored)
        return;
    auto [it, inserted] = m_byTarget.emplace(o.name, m_produced.size());
    if (o.stackEntry >= 0 && (inserted || m_stacks.contains(o.name))) {
        addStackedExpert(rule, o, rowIndex, it->second, inserted);
        return;
    }
    if (!inserted) {
        MappingRow& first = m_result.rows[m_produced[it->second].row];
        MappingRow& again = m_result.rows[rowIndex];
        again.detail = "also written from " + first.source + " (rule " + first.rule + ")";
        again.status = MappingStatus::Duplicate;
        if (first.status != MappingStatus::Duplicate) {
            first.detail = "also written from " + again.source + " (rule " + again.rule + ")";
            first.status = MappingStatus::Duplicate;
        }
        return;
    }
    m_produced.push_back({ rowIndex, std::move(o.tensor) });
}

/// One expert of a stacked target: its boxes join the other experts' in the one tensor.
void MappingBuilder::addStackedExpert(const CompiledRule& rule, Output& o, std::size_t rowIndex,
                                      std::size_t producedIndex, bool inserted)
{
    MappingRow& filled = m_result.rows[rowIndex];
    const std::string entry = "expert " + std::to_string(o.stackEntry);
    if (auto before = m_stacks.add(o.name, o.stackEntry, rule.experts, rowIndex)) {
        MappingRow& first = m_result.rows[*before];
        filled.status = MappingStatus::Duplicate;
        filled.detail = entry + " also written from " + first.source;
        if (first.status != MappingStatus::Duplicate) {
            first.status = MappingStatus::Duplicate;
            first.detail = entry + " also written from " + filled.source;
        }
        return;
    }
    if (inserted) {
        m_produced.push_back({ rowIndex, std::move(o.tensor) });
        return;
    }
    TensorInfo& whole = m_produced[producedIndex].tensor;
    if (whole.shape != o.tensor.shape || whole.savedShape != o.tensor.savedShape || whole.dtype != o.tensor.dtype) {
        filled.status = MappingStatus::ShapeMismatch;
        filled.detail = entry + " makes it " + shapeToString(o.tensor.outputShape()) + " "
            + std::string(torchName(o.tensor.dtype)) + ", but " + m_result.rows[m_produced[producedIndex].row].source
            + " makes it " + shapeToString(whole.outputShape()) + " " + std::string(torchName(whole.dtype));
        return;
    }
    for (Piece& p : o.tensor.pieces)
        whole.pieces.push_back(std::move(p));
}

/// Stacked targets some experts of which no source fills (an expert rank's files not there) are not written.
void MappingBuilder::dropIncompleteStacks()
{
    for (const auto& [target, missing] : m_stacks.incomplete()) {
        Produced& p = m_produced[m_byTarget.at(target)];
        p.dropped = true;
        MappingRow row;
        row.target = target;
        row.rule = m_result.rows[p.row].rule;
        row.ruleOrigin = m_result.rows[p.row].ruleOrigin;
        row.transform = m_result.rows[p.row].transform;
        row.expectedShape = m_result.rows[p.row].expectedShape;
        row.status = m_in.ignored(target) ? MappingStatus::Ignored : MappingStatus::Missing;
        std::string experts;
        for (std::size_t i = 0; i < missing.size() && i < 8; ++i)
            experts += (i ? ", " : "") + std::to_string(missing[i]);
        if (missing.size() > 8)
            experts += " … (" + std::to_string(missing.size()) + " in all)";
        row.detail = "holds every expert, and no source fills expert(s) " + experts
            + " (is an expert rank missing?); it is not written";
        m_result.rows.push_back(std::move(row));
    }
}

/// Expected parameters nothing fills, each with the source its rule would read it from.
void MappingBuilder::addUnfilledExpected()
{
    for (const auto& p : m_in.expected) {
        if (m_byTarget.count(p.name))
            continue;
        bool mentioned = false; // a row already explains it (shape mismatch, duplicate)
        for (const auto& r : m_result.rows)
            if (r.target == p.name && r.status != MappingStatus::Ok) {
                mentioned = true;
                break;
            }
        if (mentioned)
            continue;
        MappingRow row;
        row.target = p.name;
        row.expectedShape = p.shape;
        row.status = m_in.ignored(p.name) ? MappingStatus::Ignored : MappingStatus::Missing;
        std::string from;
        for (const auto& r : m_in.mapRules)
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
        m_result.rows.push_back(std::move(row));
    }
}

/// Problems: wrong output is never written; --no-strict lets incomplete output through.
void MappingBuilder::collectProblems(bool strict)
{
    for (const auto& r : m_result.rows) {
        const std::string name = r.target.empty() ? r.source : r.target;
        const std::string text = std::string(mappingStatusName(r.status)) + ": "
            + (r.source.empty() || r.target.empty() ? "" : r.source + " → ") + r.detail;
        switch (r.status) {
        case MappingStatus::ShapeMismatch:
        case MappingStatus::Duplicate:
            m_result.problems.push_back({ m_result.configPath, name, text });
            break;
        case MappingStatus::Unmapped:
        case MappingStatus::Missing:
        case MappingStatus::Unexpected:
            if (strict)
                m_result.problems.push_back({ m_result.configPath, name, text });
            else
                m_result.warnings.push_back(printableText(name) + ": " + text);
            break;
        case MappingStatus::Ok:
        case MappingStatus::Ignored:
        case MappingStatus::Tied:
            break;
        }
    }
}

/// The mapped checkpoint, in the model's parameter order (the order Hugging Face shards by).
void MappingBuilder::buildMapped(const std::string& configDir)
{
    std::vector<std::size_t> order(m_produced.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    auto rank = [&](std::size_t i) {
        auto it = m_in.expectedIndex.find(m_produced[i].tensor.name);
        return it == m_in.expectedIndex.end() ? m_in.expected.size() : it->second;
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rank(a) < rank(b); });
    const CheckpointInfo& source = m_in.source;
    CheckpointInfo& mapped = m_result.mapped;
    mapped.layout = "hf (mapped from " + source.layout + ")";
    mapped.root = source.root;
    mapped.hfConfigDir = configDir;
    mapped.parallel = source.parallel;
    mapped.files = source.files;
    mapped.notes = source.notes;
    mapped.notes["mapping_rules"] = m_in.set.family;
    mapped.notes["source_layout"] = source.layout;
    for (std::size_t i : order)
        if (!m_produced[i].dropped)
            mapped.tensors.push_back(std::move(m_produced[i].tensor));
    mapped.problems = source.problems;
    for (const auto& p : m_result.problems)
        mapped.problems.push_back(p);
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
    auto vars = resolveMappingVars(source, options, *config, set, result);
    TESSERA_TRY(vars);

    auto expected = expectedHfParameters(set, *vars);
    TESSERA_TRY(expected);
    std::unordered_map<std::string, std::size_t> expectedIndex;
    for (std::size_t i = 0; i < expected->size(); ++i)
        expectedIndex.emplace((*expected)[i].name, i);
    auto unstackRules = compileRules(set.unstack, *vars);
    TESSERA_TRY(unstackRules);
    auto mapRules = compileRules(set.rules, *vars, set.ranges);
    TESSERA_TRY(mapRules);

    const MappingInputs in { source, set, *config, *vars, *expected, expectedIndex, *mapRules, ignore };
    MappingBuilder builder(in, result);
    for (const TensorInfo& t : source.tensors)
        for (const Item& item : unstack(t, *unstackRules))
            builder.mapItem(item);
    builder.dropIncompleteStacks();
    builder.addUnfilledExpected();
    builder.collectProblems(options.strict);
    builder.buildMapped(configDir);
    return result;
}

} // namespace tessera
