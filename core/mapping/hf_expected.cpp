// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/hf_expected.h"
#include "io/text_file.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// A recursive-descent evaluator; small on purpose, since rule files need nothing more.
class Evaluator {
public:
    Evaluator(const std::string& text, const ConfigVars& vars) : m_text(text), m_vars(vars) { }

    Result<std::int64_t> run()
    {
        auto v = parseOr();
        skipSpace();
        if (m_error.empty() && m_pos != m_text.size())
            fail("unexpected '" + m_text.substr(m_pos) + "'");
        if (!m_error.empty())
            return makeError("expression '" + m_text + "': " + m_error);
        return v;
    }

private:
    void fail(const std::string& message)
    {
        if (m_error.empty())
            m_error = message;
    }
    void skipSpace()
    {
        while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos])))
            ++m_pos;
    }
    bool eat(const char* op)
    {
        skipSpace();
        const std::size_t n = std::char_traits<char>::length(op);
        if (m_text.compare(m_pos, n, op) != 0)
            return false;
        // "!" must not swallow the start of "!=", "<" not the start of "<=".
        if (n == 1 && m_pos + 1 < m_text.size() && m_text[m_pos + 1] == '=' && (op[0] == '!' || op[0] == '<' || op[0] == '>' || op[0] == '='))
            return false;
        m_pos += n;
        return true;
    }
    std::int64_t parseOr()
    {
        std::int64_t v = parseAnd();
        while (eat("||")) {
            const std::int64_t r = parseAnd();
            v = (v || r) ? 1 : 0;
        }
        return v;
    }
    std::int64_t parseAnd()
    {
        std::int64_t v = parseCompare();
        while (eat("&&")) {
            const std::int64_t r = parseCompare();
            v = (v && r) ? 1 : 0;
        }
        return v;
    }
    std::int64_t parseCompare()
    {
        const std::int64_t l = parseAdd();
        if (eat("=="))
            return l == parseAdd();
        if (eat("!="))
            return l != parseAdd();
        if (eat("<="))
            return l <= parseAdd();
        if (eat(">="))
            return l >= parseAdd();
        if (eat("<"))
            return l < parseAdd();
        if (eat(">"))
            return l > parseAdd();
        return l;
    }
    std::int64_t parseAdd()
    {
        std::int64_t v = parseMul();
        for (;;) {
            if (eat("+"))
                v += parseMul();
            else if (eat("-"))
                v -= parseMul();
            else
                return v;
        }
    }
    std::int64_t parseMul()
    {
        std::int64_t v = parseUnary();
        for (;;) {
            const bool mul = eat("*");
            const bool div = !mul && eat("/");
            const bool mod = !mul && !div && eat("%");
            if (!mul && !div && !mod)
                return v;
            const std::int64_t r = parseUnary();
            if ((div || mod) && r == 0) {
                fail("division by zero");
                return 0;
            }
            v = mul ? v * r : div ? v / r : v % r;
        }
    }
    std::int64_t parseUnary()
    {
        if (eat("!"))
            return parseUnary() == 0 ? 1 : 0;
        if (eat("-"))
            return -parseUnary();
        return parsePrimary();
    }
    std::int64_t parsePrimary()
    {
        skipSpace();
        if (eat("(")) {
            const std::int64_t v = parseOr();
            if (!eat(")"))
                fail("missing ')'");
            return v;
        }
        const std::size_t start = m_pos;
        if (m_pos < m_text.size() && std::isdigit(static_cast<unsigned char>(m_text[m_pos]))) {
            while (m_pos < m_text.size() && std::isdigit(static_cast<unsigned char>(m_text[m_pos])))
                ++m_pos;
            return std::stoll(m_text.substr(start, m_pos - start));
        }
        // Names are config.json keys, nested ones with a dot (vision_config.depth).
        while (m_pos < m_text.size()
               && (std::isalnum(static_cast<unsigned char>(m_text[m_pos])) || m_text[m_pos] == '_'
                   || (m_text[m_pos] == '.' && m_pos > start)))
            ++m_pos;
        if (start == m_pos) {
            fail(m_pos < m_text.size() ? "unexpected '" + m_text.substr(m_pos) + "'" : "unexpected end");
            return 0;
        }
        const std::string name = m_text.substr(start, m_pos - start);
        if (name == "true")
            return 1;
        if (name == "false")
            return 0;
        auto it = m_vars.find(name);
        if (it == m_vars.end()) {
            fail("config.json has no '" + name + "'");
            return 0;
        }
        return it->second;
    }

    const std::string& m_text;
    const ConfigVars& m_vars;
    std::size_t m_pos = 0;
    std::string m_error;
};

bool hasPlaceholder(const std::string& s, const char* name) { return s.find(std::string("{") + name + "}") != std::string::npos; }

std::string substitute(std::string s, const char* name, std::int64_t value)
{
    const std::string key = std::string("{") + name + "}";
    for (std::size_t at; (at = s.find(key)) != std::string::npos;)
        s.replace(at, key.size(), std::to_string(value));
    return s;
}

} // namespace

Result<HfModelConfig> readHfModelConfig(const std::string& configDir)
{
    if (configDir.empty())
        return makeError("no config.json was found next to the checkpoint; pass --hf_model_path with the folder that "
                         "holds the model's config.json (the mapping takes every size from it)");
    HfModelConfig config;
    config.path = (fs::path(configDir) / "config.json").string();
    const auto text = readTextFile(config.path);
    if (!text)
        return makeError(text.error().message + "; pass --hf_model_path with the folder that holds the model's "
                                                "config.json");
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError(config.path + ": not a JSON object");
    if (auto it = j.find("architectures"); it != j.end() && it->is_array())
        for (const auto& a : *it)
            if (a.is_string())
                config.architectures.push_back(a.get<std::string>());
    if (auto it = j.find("model_type"); it != j.end() && it->is_string())
        config.modelType = it->get<std::string>();
    // One level down too ("vision_config.depth"): a vision-language model's tower has a config of its own.
    auto take = [&](const std::string& key, const nlohmann::json& value) {
        if (value.is_boolean())
            config.values[key] = value.get<bool>() ? 1 : 0;
        else if (value.is_number_integer())
            config.values[key] = value.get<std::int64_t>();
    };
    for (auto& [key, value] : j.items()) {
        take(key, value);
        if (value.is_object())
            for (auto& [inner, innerValue] : value.items())
                take(key + "." + inner, innerValue);
    }
    return config;
}

Result<std::int64_t> evaluateExpression(const std::string& expression, const ConfigVars& vars)
{
    return Evaluator(expression, vars).run();
}

Result<ConfigVars> resolveConfigVars(const HfModelConfig& config, const MappingRuleSet& rules, const ConfigVars& overrides)
{
    ConfigVars vars = config.values;
    for (const auto& [name, expr] : rules.defaults) {
        if (vars.count(name))
            continue;
        auto v = evaluateExpression(expr, vars);
        if (!v)
            return v.error().withContext(config.path + ": '" + name + "' is absent and its default in the "
                                         + rules.family + " rules cannot be computed");
        vars[name] = *v;
    }
    for (const auto& [name, value] : overrides)
        vars[name] = value;
    return vars;
}

namespace {
/// True when the condition `when` uses the variable `layer` (as a whole word).
bool mentionsLayer(const std::string& when)
{
    for (std::size_t at = when.find("layer"); at != std::string::npos; at = when.find("layer", at + 1)) {
        auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
        const bool before = at > 0 && word(when[at - 1]);
        const bool after = at + 5 < when.size() && word(when[at + 5]);
        if (!before && !after)
            return true;
    }
    return false;
}

/// The count a placeholder such as {layer} runs over, from the rules' range for it.
Result<std::int64_t> placeholderRange(const MappingRuleSet& rules, const ConfigVars& vars, const char* name)
{
    auto it = rules.ranges.find(name);
    if (it == rules.ranges.end())
        return makeError("the " + rules.family + " rules use {" + name + "} but give no range for it");
    auto v = evaluateExpression(it->second, vars);
    if (!v)
        return v.error().withContext("the number of " + std::string(name) + "s");
    return v;
}

/// A template that applies to this model, with the placeholders it runs over.
struct ActiveTemplate {
    const ExpectedTemplate* t;
    bool layer, expert;
    bool perLayer; ///< its condition names `layer` (DeepSeek-V3's dense first layers): decided per layer
};

/// {block} (a vision tower's blocks) is expanded first: those templates become one per block, in place.
Result<std::vector<ExpectedTemplate>> expandBlocks(const MappingRuleSet& rules, const ConfigVars& vars)
{
    std::vector<ExpectedTemplate> templates;
    for (const auto& t : rules.expected) {
        if (!hasPlaceholder(t.hf, "block")) {
            templates.push_back(t);
            continue;
        }
        auto blocks = placeholderRange(rules, vars, "block");
        TESSERA_TRY(blocks);
        if (*blocks < 0 || *blocks > 100'000)
            return makeError("config.json gives " + std::to_string(*blocks) + " vision blocks; that is not a real model");
        for (std::int64_t b = 0; b < *blocks; ++b) {
            ExpectedTemplate one = t;
            one.hf = substitute(t.hf, "block", b);
            templates.push_back(std::move(one));
        }
    }
    return templates;
}

/// The templates whose condition holds (those decided per layer are kept, to be decided as each layer is emitted).
Result<std::vector<ActiveTemplate>> activeTemplates(const std::vector<ExpectedTemplate>& templates,
                                                    const ConfigVars& vars)
{
    std::vector<ActiveTemplate> active;
    for (const auto& t : templates) {
        const bool perLayer = hasPlaceholder(t.hf, "layer") && mentionsLayer(t.when);
        if (!t.when.empty() && !perLayer) {
            auto on = evaluateExpression(t.when, vars);
            if (!on)
                return on.error().withContext(t.origin + ": expected '" + t.id + "'");
            if (!*on)
                continue;
        }
        active.push_back({ &t, hasPlaceholder(t.hf, "layer"), hasPlaceholder(t.hf, "expert"), perLayer });
    }
    return active;
}

/// The numbers of layers and experts, read only when an active template runs over them, and refused when the
/// list they make is no real model's.
Status countLayersAndExperts(const MappingRuleSet& rules, const ConfigVars& vars,
                             const std::vector<ActiveTemplate>& active, std::int64_t& layers, std::int64_t& experts)
{
    for (const auto& a : active) {
        if (a.layer && layers == 0) {
            auto n = placeholderRange(rules, vars, "layer");
            TESSERA_TRY(n);
            layers = *n;
        }
        if (a.expert && experts == 0) {
            auto n = placeholderRange(rules, vars, "expert");
            TESSERA_TRY(n);
            experts = *n;
        }
    }

    // The list is sized by numbers config.json claims (num_hidden_layers = 1e9 asked for 100 GB); real models
    // have at most a few hundred layers and experts and well under a million parameters.
    constexpr std::int64_t kMaxCount = 1'000'000;
    if (layers < 0 || layers > kMaxCount || experts < 0 || experts > kMaxCount)
        return makeError("config.json gives " + std::to_string(layers) + " layers and " + std::to_string(experts)
                         + " experts; that is not a real model");
    std::int64_t total = 0;
    for (const auto& a : active)
        total += (a.layer ? std::max<std::int64_t>(layers, 1) : 1) * (a.expert ? std::max<std::int64_t>(experts, 1) : 1);
    if (total > kMaxCount)
        return makeError("config.json's sizes (" + std::to_string(layers) + " layers, " + std::to_string(experts)
                         + " experts) make " + std::to_string(total) + " parameters, more than the "
                         + std::to_string(kMaxCount) + " any real model has");
    return Status::success();
}

/// Emits one parameter per (template, layer, expert); the first error is kept and reported once all are emitted.
class ParameterEmitter {
public:
    explicit ParameterEmitter(const ConfigVars& vars) : m_vars(vars), m_layerVars(vars) { }

    void emit(const ActiveTemplate& a, std::int64_t layer, std::int64_t expert)
    {
        const ExpectedTemplate& t = *a.t;
        if (a.perLayer) {
            m_layerVars["layer"] = layer;
            auto on = evaluateExpression(t.when, m_layerVars);
            if (!on) {
                if (m_error.empty())
                    m_error = t.origin + ": expected '" + t.id + "': " + on.error().message;
                return;
            }
            if (!*on)
                return;
        }
        ExpectedParameter p;
        p.name = substitute(substitute(t.hf, "layer", layer), "expert", expert);
        p.templateId = t.id;
        p.shapeText = "[";
        for (std::size_t i = 0; i < t.shape.size(); ++i) {
            auto v = evaluateExpression(t.shape[i], m_vars);
            if (!v) {
                if (m_error.empty())
                    m_error = t.origin + ": expected '" + t.id + "': " + v.error().message;
                return;
            }
            p.shape.push_back(*v);
            p.shapeText += (i ? ", " : "") + t.shape[i];
        }
        p.shapeText += "]";
        m_out.push_back(std::move(p));
    }

    Result<std::vector<ExpectedParameter>> take()
    {
        if (!m_error.empty())
            return makeError(m_error);
        return std::move(m_out);
    }

private:
    const ConfigVars& m_vars;
    ConfigVars m_layerVars;
    std::vector<ExpectedParameter> m_out;
    std::string m_error;
};

/// Hugging Face's order: what precedes the layers, every layer with its parameters (experts in place), the rest.
void emitInHfOrder(const std::vector<ActiveTemplate>& active, std::int64_t layers, std::int64_t experts,
                   ParameterEmitter& emitter)
{
    std::size_t i = 0;
    for (; i < active.size() && !active[i].layer; ++i)
        emitter.emit(active[i], 0, 0);
    std::size_t layerEnd = i;
    while (layerEnd < active.size() && active[layerEnd].layer)
        ++layerEnd;
    for (std::int64_t layer = 0; layer < layers; ++layer)
        for (std::size_t k = i; k < layerEnd;) {
            if (!active[k].expert) {
                emitter.emit(active[k], layer, 0);
                ++k;
                continue;
            }
            // A run of expert templates: expert-major, as nn.ModuleList orders them.
            std::size_t end = k;
            while (end < layerEnd && active[end].expert)
                ++end;
            for (std::int64_t e = 0; e < experts; ++e)
                for (std::size_t m = k; m < end; ++m)
                    emitter.emit(active[m], layer, e);
            k = end;
        }
    for (std::size_t k = layerEnd; k < active.size(); ++k)
        for (std::int64_t layer = 0; layer < (active[k].layer ? layers : 1); ++layer)
            for (std::int64_t e = 0; e < (active[k].expert ? experts : 1); ++e)
                emitter.emit(active[k], layer, e);
}
} // namespace

Result<std::vector<ExpectedParameter>> expectedHfParameters(const MappingRuleSet& rules, const ConfigVars& vars)
{
    auto templates = expandBlocks(rules, vars);
    TESSERA_TRY(templates);
    auto active = activeTemplates(*templates, vars);
    TESSERA_TRY(active);
    std::int64_t layers = 0, experts = 0;
    TESSERA_TRY(countLayersAndExperts(rules, vars, *active, layers, experts));
    ParameterEmitter emitter(vars);
    emitInHfOrder(*active, layers, experts, emitter);
    return emitter.take();
}

} // namespace tessera
