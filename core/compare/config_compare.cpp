// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/config_compare.h"

#include "io/text_file.h"

#include <nlohmann/json.hpp>

#include <optional>

namespace tessera {

namespace {

/// The settings compared, in the order they are reported.
constexpr const char* kDefiningKeys[] = {
    "architectures",      "model_type",        "hidden_size",          "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim",            "intermediate_size",
    "vocab_size",         "tie_word_embeddings", "num_experts",          "num_local_experts",
    "n_routed_experts",   "moe_intermediate_size",
};

std::optional<nlohmann::json> readConfig(const std::string& dir)
{
    if (dir.empty())
        return std::nullopt;
    auto text = readTextFile(dir + "/config.json");
    if (!text)
        return std::nullopt;
    auto json = nlohmann::json::parse(*text, nullptr, false);
    if (json.is_discarded() || !json.is_object())
        return std::nullopt;
    return json;
}

/// `key` at the top level, else in text_config (Gemma 3, LLaVA-style configs nest the language model's).
const nlohmann::json* lookup(const nlohmann::json& config, const char* key)
{
    if (auto it = config.find(key); it != config.end() && !it->is_null())
        return &*it;
    if (auto text = config.find("text_config"); text != config.end() && text->is_object())
        if (auto it = text->find(key); it != text->end() && !it->is_null())
            return &*it;
    return nullptr;
}

} // namespace

std::vector<ConfigDifference> compareModelConfigs(const std::string& dirA, const std::string& dirB)
{
    const auto a = readConfig(dirA);
    const auto b = readConfig(dirB);
    std::vector<ConfigDifference> out;
    if (!a || !b)
        return out;
    for (const char* key : kDefiningKeys) {
        const nlohmann::json* va = lookup(*a, key);
        const nlohmann::json* vb = lookup(*b, key);
        // 64 and 64.0 are the same size.
        if (va && vb && *va != *vb && !(va->is_number() && vb->is_number() && va->get<double>() == vb->get<double>()))
            out.push_back({ key, va->dump(), vb->dump() });
    }
    return out;
}

std::string describeConfigDifferences(const std::vector<ConfigDifference>& differences)
{
    if (differences.empty())
        return {};
    std::string text = "A and B are different models (config.json): ";
    for (std::size_t i = 0; i < differences.size(); ++i)
        text += (i ? "; " : "") + differences[i].key + " " + differences[i].a + " in A, " + differences[i].b + " in B";
    return text;
}

} // namespace tessera
