// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/gguf_modelfile.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace tessera {

namespace {

const GgufValue* findValue(const std::vector<GgufKeyValue>& metadata, const std::string& key)
{
    for (const auto& kv : metadata)
        if (kv.key == key)
            return &kv.value;
    return nullptr;
}

/// generation_config.json's eos_token_id: what a chat model ends its turns with (Llama 3 lists several).
std::vector<std::int64_t> generationEosIds(const ConfigFolder& config)
{
    std::vector<std::int64_t> ids;
    if (!config.has("generation_config.json"))
        return ids;
    auto text = config.readText("generation_config.json");
    if (!text)
        return ids;
    const auto json = nlohmann::json::parse(*text, nullptr, false);
    if (!json.is_object() || !json.contains("eos_token_id"))
        return ids;
    const auto& eos = json["eos_token_id"];
    if (eos.is_number_integer())
        ids.push_back(eos.get<std::int64_t>());
    else if (eos.is_array())
        for (const auto& id : eos)
            if (id.is_number_integer())
                ids.push_back(id.get<std::int64_t>());
    return ids;
}

/// A Modelfile string: quoted, with the quote and backslash escaped.
std::string quoted(const std::string& text)
{
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\')
            out += '\\';
        out += c;
    }
    return out + "\"";
}

} // namespace

GgufModelfile ggufModelfile(const std::string& ggufFileName, const ConfigFolder& config,
                            const std::vector<GgufKeyValue>& metadata)
{
    std::vector<std::int64_t> ids = generationEosIds(config);
    const std::string source = ids.empty() ? "the tokenizer's eos" : "generation_config.json's eos_token_id";
    if (ids.empty())
        if (const GgufValue* eos = findValue(metadata, "tokenizer.ggml.eos_token_id"))
            if (auto id = eos->asInt())
                ids.push_back(*id);
    const GgufValue* tokenValue = findValue(metadata, "tokenizer.ggml.tokens");
    const GgufValue* typeValue = findValue(metadata, "tokenizer.ggml.token_type");
    const auto* tokens = tokenValue ? std::get_if<std::vector<std::string>>(&tokenValue->data) : nullptr;
    const auto* types = typeValue ? std::get_if<std::vector<std::int64_t>>(&typeValue->data) : nullptr;
    GgufModelfile modelfile;
    modelfile.text = "FROM ./" + ggufFileName + "\n";
    std::vector<std::string> written;
    for (std::int64_t id : ids) {
        const std::string what = source + " " + std::to_string(id);
        if (!tokens || id < 0 || static_cast<std::uint64_t>(id) >= tokens->size()) {
            modelfile.warnings.push_back(what + " is not in the vocabulary; the Modelfile has no stop for it");
            continue;
        }
        const auto index = static_cast<std::size_t>(id);
        const std::string& token = (*tokens)[index];
        if (token.empty() || std::find(written.begin(), written.end(), token) != written.end())
            continue;
        // llama.cpp's token types: 3 control, 4 user-defined; anything else is a piece of ordinary text.
        if (types && index < types->size() && (*types)[index] != 3 && (*types)[index] != 4)
            modelfile.warnings.push_back(what + " is '" + token + "', not a special token: the Modelfile stops "
                                         "replies there as generation_config.json says; check it");
        written.push_back(token);
        modelfile.text += "PARAMETER stop " + quoted(token) + "\n";
    }
    return modelfile;
}

} // namespace tessera
