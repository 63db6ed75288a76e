// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/megatron_mapping_rules.h"
#include "io/text_file.h"

#include "mapping/megatron_mapping_resources.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace tessera {

namespace {

using json = nlohmann::json;

struct TransformName {
    MappingTransform transform;
    const char* name;
};
constexpr TransformName kTransforms[] = {
    { MappingTransform::Copy, "copy" },
    { MappingTransform::SplitQkv, "split_qkv" },
    { MappingTransform::SplitGateUp, "split_gate_up" },
    { MappingTransform::TrimVocab, "trim_vocab" },
    { MappingTransform::UnstackLayers, "unstack_layers" },
    { MappingTransform::UnstackExperts, "unstack_experts" },
    { MappingTransform::UnstackLayersExperts, "unstack_layers_experts" },
    { MappingTransform::FuseQkvHeads, "fuse_qkv_heads" },
    { MappingTransform::Rename, "rename" },
    { MappingTransform::StackExperts, "stack_experts" },
};

/// An optional boolean member; json::value() would throw on a member of another type.
Result<bool> optionalBool(const json& object, const char* key, bool fallback, const std::string& where)
{
    auto it = object.find(key);
    if (it == object.end())
        return fallback;
    if (!it->is_boolean())
        return makeError(where + ": \"" + key + "\" must be true or false");
    return it->get<bool>();
}

/// An optional string member; json::value() would throw on a member of another type.
Result<std::string> optionalString(const json& object, const char* key, const std::string& fallback,
                                   const std::string& where)
{
    auto it = object.find(key);
    if (it == object.end())
        return fallback;
    if (!it->is_string())
        return makeError(where + ": \"" + key + "\" must be a string");
    return it->get<std::string>();
}

/// A string or a list of strings.
Result<std::vector<std::string>> stringList(const json& value, const std::string& where)
{
    std::vector<std::string> out;
    if (value.is_string()) {
        out.push_back(value.get<std::string>());
        return out;
    }
    if (!value.is_array())
        return makeError(where + " must be a string or a list of strings");
    for (const auto& item : value) {
        if (!item.is_string())
            return makeError(where + " must be a string or a list of strings");
        out.push_back(item.get<std::string>());
    }
    return out;
}

/// Replaces/removes/inserts entries of `list` by id, as an overlaying file asks.
template <typename T>
void overlayById(std::vector<T>& list, T entry, bool remove, const std::string& after)
{
    auto it = std::find_if(list.begin(), list.end(), [&](const T& e) { return e.id == entry.id; });
    if (remove) {
        if (it != list.end())
            list.erase(it);
        return;
    }
    if (it != list.end()) {
        *it = std::move(entry);
        return;
    }
    auto at = std::find_if(list.begin(), list.end(), [&](const T& e) { return e.id == after; });
    if (!after.empty() && at != list.end())
        list.insert(at + 1, std::move(entry));
    else
        list.push_back(std::move(entry));
}

Status readRules(const json& array, const char* key, bool unstack, MappingRuleSet& set, const std::string& origin)
{
    if (!array.is_array())
        return makeError(origin + ": \"" + key + "\" must be a list");
    for (std::size_t i = 0; i < array.size(); ++i) {
        const json& r = array[i];
        const std::string where = origin + ": " + key + "[" + std::to_string(i) + "]";
        if (!r.is_object() || !r.contains("id") || !r["id"].is_string())
            return makeError(where + " must be an object with a string \"id\"");
        MappingRule rule;
        rule.id = r["id"].get<std::string>();
        rule.origin = origin;
        const auto remove = optionalBool(r, "remove", false, where);
        TESSERA_TRY(remove);
        std::vector<MappingRule>& list = unstack ? set.unstack : set.rules;
        if (*remove) {
            overlayById(list, rule, true, {});
            continue;
        }
        if (!r.contains("megatron"))
            return makeError(where + " (" + rule.id + ") has no \"megatron\" pattern");
        auto patterns = stringList(r["megatron"], where + ".megatron");
        TESSERA_TRY(patterns);
        rule.megatron = std::move(*patterns);
        const char* targetKey = unstack ? "as" : "hf";
        if (!r.contains(targetKey))
            return makeError(where + " (" + rule.id + ") has no \"" + targetKey + "\"");
        auto targets = stringList(r[targetKey], where + "." + targetKey);
        TESSERA_TRY(targets);
        rule.hf = std::move(*targets);
        const auto transformValue = optionalString(r, "transform", unstack ? "" : "copy", where);
        TESSERA_TRY(transformValue);
        const std::string& transform = *transformValue;
        auto t = mappingTransformFromName(transform);
        if (!t)
            return makeError(where + " (" + rule.id + "): unknown transform '" + transform
                             + "' (copy, split_qkv, split_gate_up, trim_vocab, fuse_qkv_heads, stack_experts; in \"unstack\": "
                               "unstack_layers, unstack_experts, unstack_layers_experts, rename)");
        const bool isUnstack = *t == MappingTransform::UnstackLayers || *t == MappingTransform::UnstackExperts
            || *t == MappingTransform::UnstackLayersExperts || *t == MappingTransform::Rename;
        if (isUnstack != unstack)
            return makeError(where + " (" + rule.id + "): transform '" + transform + "' belongs in "
                             + (unstack ? "\"rules\"" : "\"unstack\""));
        rule.transform = *t;
        const std::size_t parts = rule.transform == MappingTransform::SplitQkv ? 3
            : rule.transform == MappingTransform::SplitGateUp                  ? 2
                                                                                : 1;
        if (rule.hf.size() != parts)
            return makeError(where + " (" + rule.id + "): transform '" + transform + "' writes "
                             + std::to_string(parts) + " tensor(s) but " + std::to_string(rule.hf.size())
                             + " target name(s) are given");
        auto when = optionalString(r, "when", "", where);
        TESSERA_TRY(when);
        auto after = optionalString(r, "after", "", where);
        TESSERA_TRY(after);
        auto heads = optionalString(r, "heads", "", where);
        TESSERA_TRY(heads);
        if (rule.transform == MappingTransform::FuseQkvHeads && heads->empty())
            return makeError(where + " (" + rule.id + "): transform 'fuse_qkv_heads' needs \"heads\", the number of "
                             "heads (e.g. \"vision_config.num_heads\")");
        auto layerOffset = optionalString(r, "layer_offset", "", where);
        TESSERA_TRY(layerOffset);
        if (!layerOffset->empty() && !std::any_of(rule.megatron.begin(), rule.megatron.end(), [](const std::string& m) {
                return m.find("{layer}") != std::string::npos;
            }))
            return makeError(where + " (" + rule.id + "): \"layer_offset\" needs a {layer} in the Megatron pattern");
        auto transpose = optionalBool(r, "transpose", false, where);
        TESSERA_TRY(transpose);
        auto interleave = optionalBool(r, "interleave_gate_up", false, where);
        TESSERA_TRY(interleave);
        if ((*transpose || *interleave) && rule.transform != MappingTransform::StackExperts)
            return makeError(where + " (" + rule.id + "): \"transpose\" and \"interleave_gate_up\" belong to transform "
                             "'stack_experts'");
        if (rule.transform == MappingTransform::StackExperts) {
            // Every expert's tensor lands in the one target: the expert number comes from the Megatron name only.
            const bool numbered = std::all_of(rule.megatron.begin(), rule.megatron.end(), [](const std::string& m) {
                return m.find("{expert}") != std::string::npos;
            });
            if (!numbered || rule.hf.front().find("{expert}") != std::string::npos)
                return makeError(where + " (" + rule.id + "): transform 'stack_experts' needs {expert} in every Megatron "
                                 "pattern and none in the target, which holds all the experts");
        }
        rule.transpose = *transpose;
        rule.interleaveGateUp = *interleave;
        rule.layerOffset = *layerOffset;
        rule.heads = *heads;
        rule.when = *when;
        overlayById(list, std::move(rule), false, *after);
    }
    return Status::success();
}

Status readExpected(const json& array, MappingRuleSet& set, const std::string& origin)
{
    if (!array.is_array())
        return makeError(origin + ": \"expected\" must be a list");
    for (std::size_t i = 0; i < array.size(); ++i) {
        const json& e = array[i];
        const std::string where = origin + ": expected[" + std::to_string(i) + "]";
        if (!e.is_object() || !e.contains("id") || !e["id"].is_string())
            return makeError(where + " must be an object with a string \"id\"");
        ExpectedTemplate t;
        t.id = e["id"].get<std::string>();
        t.origin = origin;
        const auto remove = optionalBool(e, "remove", false, where);
        TESSERA_TRY(remove);
        if (*remove) {
            overlayById(set.expected, t, true, {});
            continue;
        }
        if (!e.contains("hf") || !e["hf"].is_string())
            return makeError(where + " (" + t.id + ") needs a string \"hf\"");
        t.hf = e["hf"].get<std::string>();
        if (!e.contains("shape") || !e["shape"].is_array())
            return makeError(where + " (" + t.id + ") needs \"shape\", a list of expressions");
        for (const auto& d : e["shape"]) {
            if (d.is_number_integer())
                t.shape.push_back(std::to_string(d.get<std::int64_t>()));
            else if (d.is_string())
                t.shape.push_back(d.get<std::string>());
            else
                return makeError(where + " (" + t.id + "): shape entries are numbers or expressions");
        }
        auto when = optionalString(e, "when", "", where);
        TESSERA_TRY(when);
        auto after = optionalString(e, "after", "", where);
        TESSERA_TRY(after);
        t.when = *when;
        overlayById(set.expected, std::move(t), false, *after);
    }
    return Status::success();
}

const EmbeddedResource* findBuiltin(const std::string& family)
{
    for (const auto& r : embeddedMappingRules())
        if (family + ".json" == r.name)
            return &r;
    return nullptr;
}

std::string joined(const std::vector<std::string>& items)
{
    std::string s;
    for (const auto& i : items)
        s += (s.empty() ? "" : ", ") + i;
    return s;
}

Result<MappingRuleSet> resolveBuiltin(const std::string& family, std::set<std::string>& visiting)
{
    const EmbeddedResource* resource = findBuiltin(family);
    if (!resource)
        return makeError("no built-in mapping rules named '" + family + "' (built in: "
                         + joined(builtinMappingFamilies()) + ")");
    if (!visiting.insert(family).second)
        return makeError(std::string(resource->name) + ": \"extends\" loops back to '" + family + "'");
    auto parsed = json::parse(resource->text, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object())
        return makeError(std::string(resource->name) + ": not a JSON object");
    MappingRuleSet base;
    if (auto it = parsed.find("extends"); it != parsed.end() && it->is_string()) {
        auto parent = resolveBuiltin(it->get<std::string>(), visiting);
        TESSERA_TRY(parent);
        base = std::move(*parent);
        // A family is known by its own names only: a child never inherits its parent's architectures.
        base.architectures.clear();
        base.modelTypes.clear();
        base.description.clear();
    }
    return overlayMappingRules(base, resource->text, resource->name);
}

} // namespace

const char* mappingTransformName(MappingTransform transform)
{
    for (const auto& t : kTransforms)
        if (t.transform == transform)
            return t.name;
    return "?";
}

std::optional<MappingTransform> mappingTransformFromName(const std::string& name)
{
    for (const auto& t : kTransforms)
        if (name == t.name)
            return t.transform;
    return std::nullopt;
}

Result<MappingRuleSet> overlayMappingRules(const MappingRuleSet& base, const std::string& text, const std::string& origin)
{
    auto j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError(origin + ": not a JSON object (a mapping rules file: family, rules, expected, …)");
    MappingRuleSet set = base;
    set.sources.push_back(origin);
    if (auto it = j.find("family"); it != j.end() && it->is_string())
        set.family = it->get<std::string>();
    if (auto it = j.find("description"); it != j.end() && it->is_string())
        set.description = it->get<std::string>();
    for (const char* key : { "architectures", "model_types" }) {
        auto it = j.find(key);
        if (it == j.end())
            continue;
        auto list = stringList(*it, origin + ": " + key);
        TESSERA_TRY(list);
        (std::strcmp(key, "architectures") == 0 ? set.architectures : set.modelTypes) = std::move(*list);
    }
    for (const char* key : { "defaults", "ranges" }) {
        auto it = j.find(key);
        if (it == j.end())
            continue;
        if (!it->is_object())
            return makeError(origin + ": \"" + key + "\" must be an object of name → expression");
        for (auto& [name, value] : it->items()) {
            std::string expr;
            if (value.is_string())
                expr = value.get<std::string>();
            else if (value.is_number_integer())
                expr = std::to_string(value.get<std::int64_t>());
            else if (value.is_boolean())
                expr = value.get<bool>() ? "1" : "0";
            else
                return makeError(origin + ": " + key + "." + name + " must be an expression, a number or a boolean");
            if (std::strcmp(key, "ranges") == 0) {
                set.ranges[name] = expr;
                continue;
            }
            const std::string variable = name; // a lambda may not capture a structured binding in C++17
            auto d = std::find_if(set.defaults.begin(), set.defaults.end(),
                                  [&](const auto& p) { return p.first == variable; });
            if (d != set.defaults.end())
                d->second = expr;
            else
                set.defaults.emplace_back(name, expr);
        }
    }
    if (auto it = j.find("unstack"); it != j.end())
        TESSERA_TRY(readRules(*it, "unstack", true, set, origin));
    if (auto it = j.find("rules"); it != j.end())
        TESSERA_TRY(readRules(*it, "rules", false, set, origin));
    if (auto it = j.find("expected"); it != j.end())
        TESSERA_TRY(readExpected(*it, set, origin));
    return set;
}

std::vector<std::string> builtinMappingFamilies()
{
    std::vector<std::string> names;
    for (const auto& r : embeddedMappingRules()) {
        std::string name = r.name;
        if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0)
            names.push_back(name.substr(0, name.size() - 5));
    }
    std::sort(names.begin(), names.end());
    return names;
}

Result<MappingRuleSet> builtinMappingRules(const std::string& family)
{
    std::set<std::string> visiting;
    return resolveBuiltin(family, visiting);
}

Result<MappingRuleSet> selectMappingRules(const std::vector<std::string>& architectures, const std::string& modelType)
{
    std::vector<MappingRuleSet> all;
    for (const auto& family : builtinMappingFamilies()) {
        auto set = builtinMappingRules(family);
        TESSERA_TRY(set);
        all.push_back(std::move(*set));
    }
    for (const auto& arch : architectures)
        for (const auto& set : all)
            if (std::find(set.architectures.begin(), set.architectures.end(), arch) != set.architectures.end())
                return set;
    for (const auto& set : all)
        if (!modelType.empty() && std::find(set.modelTypes.begin(), set.modelTypes.end(), modelType) != set.modelTypes.end())
            return set;
    std::vector<std::string> known;
    for (const auto& set : all)
        for (const auto& a : set.architectures)
            known.push_back(a);
    return makeError("no Megatron → Hugging Face mapping rules for architectures [" + joined(architectures)
                     + "], model_type '" + modelType + "' (built in: " + joined(known)
                     + "); write a rules file that \"extends\" the nearest family and pass it with --param_mapping");
}

Result<MappingRuleSet> applyUserMappingRules(const MappingRuleSet& base, const std::string& path,
                                             const std::optional<std::string>& given)
{
    const auto contents = given ? Result<std::string>(*given) : readTextFile(path);
    if (!contents)
        return makeError(contents.error().message + " (the mapping rules file)");
    const std::string& text = *contents;
    auto j = json::parse(text, nullptr, false);
    if (!j.is_discarded() && j.is_object())
        if (auto it = j.find("extends"); it != j.end() && it->is_string() && it->get<std::string>() != base.family) {
            auto other = builtinMappingRules(it->get<std::string>());
            if (!other)
                return other.error().withContext(path);
            return overlayMappingRules(*other, text, path);
        }
    return overlayMappingRules(base, text, path);
}

} // namespace tessera
