// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/hf_output.h"
#include "io/durable_file.h"
#include "io/path_kinds.h"
#include "io/text_file.h"
#include "mapping/megatron_mapping_rules.h"
#include "text_util.h"

#include <nlohmann/json.hpp>

#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

Result<HfConfigFacts> readHfConfig(const ConfigFolder& folder)
{
    HfConfigFacts facts;
    if (!folder.has("config.json"))
        return facts;
    const fs::path path = folder.pathOf("config.json");
    auto text = folder.readText("config.json");
    TESSERA_TRY(text);
    auto json = nlohmann::json::parse(*text, nullptr, false);
    if (json.is_discarded() || !json.is_object())
        return makeError(path.string() + ": not a valid JSON object");
    facts.found = true;
    if (auto it = json.find("tie_word_embeddings"); it != json.end() && it->is_boolean()) {
        facts.tieWordEmbeddings = it->get<bool>();
        facts.tieWordEmbeddingsSet = true;
    }
    for (const char* key : { "torch_dtype", "dtype" })
        if (auto it = json.find(key); it != json.end() && it->is_string() && facts.torchDtype.empty())
            facts.torchDtype = it->get<std::string>();
    if (auto it = json.find("quantization_config"); it != json.end()) {
        facts.quantization = "unknown";
        if (it->is_object())
            if (auto method = it->find("quant_method"); method != it->end() && method->is_string()
                && !method->get<std::string>().empty())
                facts.quantization = method->get<std::string>();
    }
    if (auto it = json.find("architectures"); it != json.end() && it->is_array())
        for (const auto& a : *it)
            if (a.is_string())
                facts.architectures.push_back(a.get<std::string>());
    // Absent, the key takes the default of the model's config class: untied for Llama, Qwen2, Mistral…, tied for
    // Gemma. The family rules record it; with no family known, lm_head is kept, which never loses a weight.
    if (!facts.tieWordEmbeddingsSet) {
        const auto modelType = json.find("model_type");
        auto rules = selectMappingRules(facts.architectures,
                                        modelType != json.end() && modelType->is_string() ? modelType->get<std::string>() : "");
        if (rules)
            for (const auto& [name, value] : rules->defaults)
                if (name == "tie_word_embeddings")
                    facts.tieWordEmbeddings = value == "1";
    }
    return facts;
}

Result<std::string> rewriteConfigDtype(const std::string& text, DType dtype)
{
    const std::string value = "\"" + std::string(torchName(dtype)) + "\"";
    // A small JSON scanner: it finds `"torch_dtype": <value>` at any depth and `"dtype": <value>` at the top
    // level, and splices the new value in, so that formatting and key order stay byte-identical.
    std::string out;
    out.reserve(text.size() + 32);
    int depth = 0;
    bool replacedAny = false;
    std::size_t i = 0;
    auto skipSpace = [&](std::size_t p) {
        while (p < text.size() && (text[p] == ' ' || text[p] == '\t' || text[p] == '\n' || text[p] == '\r'))
            ++p;
        return p;
    };
    auto stringEnd = [&](std::size_t p) -> std::size_t { // p at opening quote; returns index after closing quote
        for (std::size_t q = p + 1; q < text.size(); ++q) {
            if (text[q] == '\\')
                ++q;
            else if (text[q] == '"')
                return q + 1;
        }
        return std::string::npos;
    };
    while (i < text.size()) {
        const char c = text[i];
        if (c == '{' || c == '[') {
            ++depth;
        } else if (c == '}' || c == ']') {
            --depth;
        } else if (c == '"') {
            const std::size_t end = stringEnd(i);
            if (end == std::string::npos)
                return makeError("config.json: unterminated string");
            const std::string key = text.substr(i + 1, end - i - 2);
            out.append(text, i, end - i);
            i = end;
            const std::size_t colon = skipSpace(i);
            if (colon < text.size() && text[colon] == ':' && (key == "torch_dtype" || (key == "dtype" && depth == 1))) {
                const std::size_t v = skipSpace(colon + 1);
                std::size_t vEnd = std::string::npos;
                if (v < text.size() && text[v] == '"')
                    vEnd = stringEnd(v);
                else if (text.compare(v, 4, "null") == 0)
                    vEnd = v + 4;
                if (vEnd != std::string::npos) {
                    out.append(text, i, v - i);
                    out += value;
                    i = vEnd;
                    replacedAny = true;
                }
            }
            continue;
        }
        out += c;
        ++i;
    }
    if (replacedAny)
        return out;
    auto json = nlohmann::ordered_json::parse(text, nullptr, false);
    if (json.is_discarded() || !json.is_object())
        return makeError("config.json: not a valid JSON object");
    json["torch_dtype"] = std::string(torchName(dtype));
    return json.dump(2) + "\n";
}

Result<std::string> rewriteConfigTied(const std::string& text)
{
    auto json = nlohmann::ordered_json::parse(text, nullptr, false);
    if (json.is_discarded() || !json.is_object())
        return makeError("config.json: not a valid JSON object");
    json["tie_word_embeddings"] = true;
    return json.dump(2) + "\n";
}

Result<std::string> rewriteConfigUnquantized(const std::string& text)
{
    auto json = nlohmann::ordered_json::parse(text, nullptr, false);
    if (json.is_discarded() || !json.is_object())
        return makeError("config.json: not a valid JSON object");
    if (!json.contains("quantization_config"))
        return text;
    json.erase("quantization_config");
    return json.dump(2) + "\n";
}

Status copyHfSideFiles(const ConfigFolder& folder, const std::string& destDir, const ConfigEdits& edits)
{
    for (const auto& name : folder.files) {
        const std::string from = folder.pathOf(name);
        const fs::path to = fs::path(destDir) / name;
        if (name == "config.json" && edits.any()) {
            auto text = folder.readText(name);
            TESSERA_TRY(text);
            Result<std::string> rewritten = *text;
            if (edits.dtype)
                rewritten = rewriteConfigDtype(*rewritten, *edits.dtype);
            if (rewritten && edits.tieWordEmbeddings)
                rewritten = rewriteConfigTied(*rewritten);
            if (rewritten && edits.dropQuantization)
                rewritten = rewriteConfigUnquantized(*rewritten);
            if (!rewritten)
                return rewritten.error().withContext(from);
            TESSERA_TRY(writeFileSynced(to.string(), *rewritten));
            continue;
        }
        auto source = folder.open(name);
        TESSERA_TRY(source);
        TESSERA_TRY(copyOpenFileSynced(source->fd(), from, to.string()));
    }
    return Status::success();
}

std::vector<std::string> conflictingWeightFiles(const std::string& targetDir, const std::vector<std::string>& newFiles)
{
    std::vector<std::string> conflicts;
    std::error_code ec;
    if (!fs::is_directory(targetDir, ec))
        return conflicts;
    for (const auto& entry : folderEntries(targetDir, ec)) {
        const std::string name = entry.path().filename().string();
        const bool weight = endsWith(name, ".safetensors") || endsWith(name, ".safetensors.index.json")
            || (startsWith(name, "pytorch_model") && (endsWith(name, ".bin") || endsWith(name, ".bin.index.json")))
            || endsWith(name, ".gguf");
        if (weight && std::find(newFiles.begin(), newFiles.end(), name) == newFiles.end())
            conflicts.push_back(name);
    }
    std::sort(conflicts.begin(), conflicts.end());
    return conflicts;
}

std::vector<std::string> conflictingSideFiles(const std::string& targetDir, const std::vector<std::string>& newFiles)
{
    std::vector<std::string> conflicts;
    std::error_code ec;
    if (!fs::is_directory(targetDir, ec))
        return conflicts;
    for (const auto& entry : folderEntries(targetDir, ec)) {
        const std::string name = entry.path().filename().string();
        // Remote code is loaded only through the config.json and tokenizer_config.json that name it, which
        // this check covers: a script of the user's beside them is no part of a model.
        if (isHfSideFile(name) && !endsWith(name, ".py")
            && std::find(newFiles.begin(), newFiles.end(), name) == newFiles.end())
            conflicts.push_back(name);
    }
    std::sort(conflicts.begin(), conflicts.end());
    return conflicts;
}

std::optional<std::uint64_t> freeDiskBytes(const std::string& path)
{
    std::error_code ec;
    fs::path p = fs::absolute(path, ec);
    while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path())
        p = p.parent_path();
    struct statvfs st {};
    if (statvfs(p.c_str(), &st) != 0)
        return std::nullopt;
    return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

} // namespace tessera
