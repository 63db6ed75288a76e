// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/megatron_rule_patterns.h"

#include "formats/megatron_names.h"

#include <charconv>

namespace tessera::mapping_internal {

Result<Pattern> compilePattern(const std::string& text, const std::string& where)
{
    static const std::string special = R"(\^$.|?*+()[]{})";
    std::vector<std::string> names;
    std::string re;
    for (std::size_t i = 0; i < text.size();) {
        if (text[i] == '{') {
            const auto close = text.find('}', i);
            if (close == std::string::npos)
                return makeError(where + ": '" + text + "' has an unclosed '{'");
            const std::string name = text.substr(i + 1, close - i - 1);
            if (name == "layer" || name == "expert" || name == "block")
                re += "(\\d+)";
            else if (name == "param")
                re += "([A-Za-z_].*)";
            else
                return makeError(where + ": '" + text + "' uses {" + name + "}; only {layer}, {expert}, {block} and {param} exist");
            names.push_back(name);
            i = close + 1;
            continue;
        }
        if (special.find(text[i]) != std::string::npos)
            re += '\\';
        re += text[i++];
    }
    auto compiled = Regex::compile(re, where + ": the pattern '" + text + "' as the regex");
    TESSERA_TRY(compiled);
    return Pattern { text, std::move(*compiled), std::move(names) };
}

std::optional<Captures> matchPattern(const Pattern& p, const std::string& name)
{
    std::vector<std::string> m;
    if (!p.regex.fullMatch(name, m))
        return std::nullopt;
    Captures c;
    for (std::size_t i = 0; i < p.names.size(); ++i) {
        auto [it, inserted] = c.emplace(p.names[i], m[i]);
        if (!inserted && it->second != m[i])
            return std::nullopt; // the same placeholder twice must capture the same text
    }
    return c;
}

std::string render(std::string text, const Captures& captures)
{
    for (const auto& [name, value] : captures) {
        const std::string key = "{" + name + "}";
        for (std::size_t at; (at = text.find(key)) != std::string::npos;)
            text.replace(at, key.size(), value);
    }
    return text;
}

Captures offsetLayer(Captures captures, std::int64_t offset)
{
    auto it = captures.find("layer");
    std::int64_t layer = 0;
    // The pattern captured digits; a number too long for 64 bits (a damaged name) is left as it is.
    if (offset != 0 && it != captures.end()) {
        const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), layer);
        if (ec == std::errc() && end == it->second.data() + it->second.size() && layer <= kMaxMegatronIndex)
            it->second = std::to_string(layer + offset);
    }
    return captures;
}

Result<std::vector<CompiledRule>> compileRules(const std::vector<MappingRule>& rules, const ConfigVars& vars,
                                               const std::map<std::string, std::string>& ranges)
{
    std::vector<CompiledRule> out;
    for (const auto& rule : rules) {
        if (!rule.when.empty()) {
            auto on = evaluateExpression(rule.when, vars);
            if (!on)
                return on.error().withContext(rule.origin + ": rule '" + rule.id + "'");
            if (!*on)
                continue;
        }
        CompiledRule c { &rule, {}, {}, 0, 0 };
        if (rule.transform == MappingTransform::StackExperts) {
            auto range = ranges.find("expert");
            if (range == ranges.end())
                return makeError(rule.origin + ": rule '" + rule.id + "': stack_experts needs the family's \"expert\" range "
                                 "(the number of experts)");
            auto experts = evaluateExpression(range->second, vars);
            if (!experts)
                return experts.error().withContext(rule.origin + ": rule '" + rule.id + "': the number of experts");
            if (*experts <= 0 || *experts > kMaxMegatronIndex)
                return makeError(rule.origin + ": rule '" + rule.id + "': " + range->second + " is "
                                 + std::to_string(*experts) + ", not an expert count of a real model");
            c.experts = *experts;
        }
        if (!rule.layerOffset.empty()) {
            auto offset = evaluateExpression(rule.layerOffset, vars);
            if (!offset)
                return offset.error().withContext(rule.origin + ": rule '" + rule.id + "': layer_offset");
            if (*offset < -kMaxMegatronIndex || *offset > kMaxMegatronIndex)
                return makeError(rule.origin + ": rule '" + rule.id + "': layer_offset " + rule.layerOffset + " is "
                                 + std::to_string(*offset) + ", not a layer count of a real model");
            c.layerOffset = *offset;
        }
        for (const auto& m : rule.megatron) {
            auto p = compilePattern(m, rule.origin + ": rule '" + rule.id + "'");
            TESSERA_TRY(p);
            c.megatron.push_back(std::move(*p));
        }
        for (const auto& h : rule.hf) {
            auto p = compilePattern(h, rule.origin + ": rule '" + rule.id + "'");
            TESSERA_TRY(p);
            c.hf.push_back(std::move(*p));
        }
        out.push_back(std::move(c));
    }
    return out;
}

} // namespace tessera::mapping_internal
