// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_tokenizer.h"


#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

namespace fs = std::filesystem;
using nlohmann::json;

namespace tessera {

namespace {

// llama.cpp's token types.
enum TokenType : std::int64_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

constexpr std::uint64_t kMaxTokenizerBytes = 256ull << 20;

/// The split regexes of the pre-tokenizers llama.cpp knows by name.
struct KnownPre {
    const char* name;
    const char* regex;
};
const KnownPre kKnownPre[] = {
    { "gpt-2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)" },
    { "llama-bpe",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)" },
    { "qwen2",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)" },
};

/// A token given in tokenizer_config.json / special_tokens_map.json: "<s>" or {"content": "<s>", …}.
std::optional<std::string> tokenContent(const json& v)
{
    if (v.is_string())
        return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string())
        return v["content"].get<std::string>();
    return std::nullopt;
}

/// A JSON file of the folder; nullopt when the folder does not list it (absent, or not readable: see ConfigFolder).
std::optional<json> readJson(const ConfigFolder& folder, const std::string& name, std::vector<std::string>& problems)
{
    if (!folder.has(name))
        return std::nullopt;
    const std::string file = folder.pathOf(name);
    auto text = folder.readText(name, kMaxTokenizerBytes);
    if (!text) {
        problems.push_back(text.error().message);
        return std::nullopt;
    }
    auto parsed = json::parse(*text, nullptr, false);
    if (parsed.is_discarded()) {
        problems.push_back(file + ": not valid JSON");
        return std::nullopt;
    }
    return parsed;
}

/// Walks a pre_tokenizer (or a Sequence of them) for a Split regex and whether a ByteLevel step is there.
void scanPreTokenizer(const json& p, std::string& regex, bool& byteLevel, bool& byteLevelRegex)
{
    if (!p.is_object())
        return;
    const std::string type = p.value("type", "");
    if (type == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array()) {
        for (const auto& s : p["pretokenizers"])
            scanPreTokenizer(s, regex, byteLevel, byteLevelRegex);
    } else if (type == "Split" && p.contains("pattern") && p["pattern"].is_object()) {
        if (p["pattern"].contains("Regex") && p["pattern"]["Regex"].is_string() && regex.empty())
            regex = p["pattern"]["Regex"].get<std::string>();
    } else if (type == "ByteLevel") {
        byteLevel = true;
        if (p.value("use_regex", true))
            byteLevelRegex = true;
    }
}

struct Vocab {
    std::vector<std::string> tokens;
    std::vector<std::int64_t> types;
    std::vector<double> scores; ///< SentencePiece only
    std::map<std::string, std::int64_t> ids;
};

/// Pads the vocabulary to the embedding's rows, as convert_hf_to_gguf does.
Status padVocab(Vocab& v, std::uint64_t vocabSize, bool withScores, const std::string& source)
{
    if (vocabSize == 0)
        return Status::success();
    if (v.tokens.size() > vocabSize)
        return makeError(source + " has " + std::to_string(v.tokens.size()) + " tokens but the model's embedding has "
                         + std::to_string(vocabSize) + " rows");
    for (std::size_t i = v.tokens.size(); i < vocabSize; ++i) {
        v.tokens.push_back("[PAD" + std::to_string(i) + "]");
        v.types.push_back(Unused);
        if (withScores)
            v.scores.push_back(-1000.0);
    }
    return Status::success();
}

/// Tokenizer ids of bos/eos/pad/unk from tokenizer_config.json (then special_tokens_map.json, then config.json).
void addSpecialIds(std::vector<GgufKeyValue>& md, const Vocab& vocab, const std::optional<json>& tokConfig,
                   const std::optional<json>& specialMap, const json& config, const std::map<std::string, int>& fallback,
                   std::string& summary)
{
    const std::pair<const char*, const char*> keys[] = { { "bos_token", "tokenizer.ggml.bos_token_id" },
                                                         { "eos_token", "tokenizer.ggml.eos_token_id" },
                                                         { "unk_token", "tokenizer.ggml.unknown_token_id" },
                                                         { "pad_token", "tokenizer.ggml.padding_token_id" } };
    for (const auto& [hfKey, ggufKey] : keys) {
        std::optional<std::int64_t> id;
        for (const auto* source : { &tokConfig, &specialMap }) {
            if (id || !*source || !(*source)->is_object() || !(*source)->contains(hfKey))
                continue;
            if (auto content = tokenContent((**source)[hfKey])) {
                auto it = vocab.ids.find(*content);
                if (it != vocab.ids.end())
                    id = it->second;
            }
        }
        const std::string idKey = std::string(hfKey) + "_id";
        if (!id && config.is_object() && config.contains(idKey)) {
            const json& v = config[idKey];
            if (v.is_number_integer())
                id = v.get<std::int64_t>();
            else if (v.is_array() && !v.empty() && v[0].is_number_integer())
                id = v[0].get<std::int64_t>();
        }
        if (!id) {
            auto it = fallback.find(hfKey);
            if (it != fallback.end() && it->second >= 0)
                id = it->second;
        }
        if (id && *id >= 0 && static_cast<std::size_t>(*id) < vocab.tokens.size()) {
            md.push_back({ ggufKey, GgufValue::u32(static_cast<std::uint32_t>(*id)) });
            summary += std::string(", ") + std::string(hfKey).substr(0, 3) + " " + std::to_string(*id);
        }
    }
}

void addFlagsAndTemplate(std::vector<GgufKeyValue>& md, const std::optional<json>& tokConfig, const ConfigFolder& folder,
                         std::optional<bool> defaultAddBos, std::vector<std::string>& problems)
{
    std::optional<bool> addBos = defaultAddBos, addEos;
    if (tokConfig && tokConfig->is_object()) {
        if (tokConfig->contains("add_bos_token") && (*tokConfig)["add_bos_token"].is_boolean())
            addBos = (*tokConfig)["add_bos_token"].get<bool>();
        if (tokConfig->contains("add_eos_token") && (*tokConfig)["add_eos_token"].is_boolean())
            addEos = (*tokConfig)["add_eos_token"].get<bool>();
    }
    if (addBos)
        md.push_back({ "tokenizer.ggml.add_bos_token", GgufValue::boolean(*addBos) });
    if (addEos)
        md.push_back({ "tokenizer.ggml.add_eos_token", GgufValue::boolean(*addEos) });
    // The chat template: chat_template.jinja (newer transformers) or tokenizer_config.json's chat_template, a
    // string or a list of named templates (the one named "default" is the main one).
    if (folder.has("chat_template.jinja")) {
        auto text = folder.readText("chat_template.jinja");
        if (text) {
            md.push_back({ "tokenizer.chat_template", GgufValue::string(*text) });
            return;
        }
        problems.push_back(text.error().message);
    }
    if (!tokConfig || !tokConfig->is_object() || !tokConfig->contains("chat_template"))
        return;
    const json& t = (*tokConfig)["chat_template"];
    if (t.is_string()) {
        md.push_back({ "tokenizer.chat_template", GgufValue::string(t.get<std::string>()) });
    } else if (t.is_array()) {
        std::vector<std::string> names;
        for (const auto& entry : t) {
            if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")
                || !entry["name"].is_string() || !entry["template"].is_string())
                continue;
            const std::string name = entry["name"].get<std::string>();
            if (name == "default") {
                md.push_back({ "tokenizer.chat_template", GgufValue::string(entry["template"].get<std::string>()) });
            } else {
                md.push_back({ "tokenizer.chat_template." + name, GgufValue::string(entry["template"].get<std::string>()) });
                names.push_back(name);
            }
        }
        if (!names.empty())
            md.push_back({ "tokenizer.chat_templates", GgufValue::strings(names) });
    }
}

bool looksSpecial(const std::string& token)
{
    // Tokens like <|im_start|>, <s>, [INST]: control tokens, as convert_hf_to_gguf's does_token_look_special.
    return (token.size() >= 2 && token.front() == '<' && token.back() == '>')
        || (token.size() >= 2 && token.front() == '[' && token.back() == ']');
}

Result<GgufTokenizer> fromTokenizerJson(const json& tok, const ConfigFolder& folder, std::uint64_t vocabSize,
                                        const std::optional<json>& tokConfig, const std::optional<json>& specialMap,
                                        const json& config)
{
    const std::string source = folder.pathOf("tokenizer.json");
    GgufTokenizer out;
    const json& model = tok["model"];
    if (!model.contains("vocab") || !model["vocab"].is_object())
        return makeError(source + ": model.vocab is missing or not an object");
    Vocab v;
    std::int64_t maxId = -1;
    std::map<std::int64_t, std::string> byId;
    // Ids below the embedding's rows (or, not knowing them, below the number of tokens listed): every id up to
    // the largest becomes a token, so an id is checked before the vocabulary is filled up to it.
    const std::size_t listed = model["vocab"].size() + (tok.contains("added_tokens") ? tok["added_tokens"].size() : 0);
    if (vocabSize && model["vocab"].size() > vocabSize)
        return makeError(source + " has " + std::to_string(model["vocab"].size()) + " tokens but the model's embedding has "
                         + std::to_string(vocabSize) + " rows");
    const std::uint64_t idLimit = vocabSize ? vocabSize : listed;
    const std::string limitText = vocabSize ? "the model's embedding has " + std::to_string(vocabSize) + " rows"
                                            : "the file lists " + std::to_string(listed) + " tokens";
    for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
        if (!it.value().is_number_integer() || it.value().get<std::int64_t>() < 0)
            return makeError(source + ": the id of token " + it.key() + " is not a valid number");
        const auto id = it.value().get<std::int64_t>();
        if (static_cast<std::uint64_t>(id) >= idLimit)
            return makeError(source + ": token " + it.key() + " has id " + std::to_string(id) + ", but " + limitText);
        byId[id] = it.key();
        maxId = std::max(maxId, id);
    }
    std::map<std::int64_t, bool> added; // id → special
    if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
        for (const auto& a : tok["added_tokens"]) {
            if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content")
                || !a["content"].is_string())
                continue;
            const auto id = a["id"].get<std::int64_t>();
            if (id < 0 || static_cast<std::uint64_t>(id) >= idLimit)
                return makeError(source + ": added token " + a["content"].get<std::string>() + " has id "
                                 + std::to_string(id) + ", but " + limitText);
            byId[id] = a["content"].get<std::string>();
            added[id] = a.value("special", false);
            maxId = std::max(maxId, id);
        }
    for (std::int64_t id = 0; id <= maxId; ++id) {
        auto it = byId.find(id);
        if (it == byId.end()) {
            v.tokens.push_back("[PAD" + std::to_string(id) + "]");
            v.types.push_back(Unused);
            continue;
        }
        v.tokens.push_back(it->second);
        v.ids.emplace(it->second, id);
        auto a = added.find(id);
        if (a == added.end())
            v.types.push_back(Normal);
        else
            v.types.push_back(a->second || looksSpecial(it->second) ? Control : UserDefined);
    }
    TESSERA_TRY(padVocab(v, vocabSize, false, source));

    std::vector<std::string> merges;
    if (model.contains("merges") && model["merges"].is_array())
        for (const auto& m : model["merges"]) {
            if (m.is_string())
                merges.push_back(m.get<std::string>());
            else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
                merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
            else
                return makeError(source + ": a merge is neither \"a b\" nor [\"a\", \"b\"]");
        }
    std::string regex;
    bool byteLevel = false, byteLevelRegex = false;
    if (tok.contains("pre_tokenizer"))
        scanPreTokenizer(tok["pre_tokenizer"], regex, byteLevel, byteLevelRegex);
    if (regex.empty() && byteLevelRegex)
        out.pre = "gpt-2"; // ByteLevel's own split is GPT-2's regex
    else
        out.pre = ggufPreTokenizerForRegex(regex);
    if (out.pre.empty()) {
        out.pre = "default";
        out.warnings.push_back("the tokenizer's pre-tokenizer regex is not one llama.cpp names; written as 'default', "
                               "so llama.cpp may split text differently than the original tokenizer");
    }
    out.model = "gpt2";
    auto& md = out.metadata;
    md.push_back({ "tokenizer.ggml.model", GgufValue::string("gpt2") });
    md.push_back({ "tokenizer.ggml.pre", GgufValue::string(out.pre) });
    out.tokens = v.tokens.size();
    const std::size_t mergeCount = merges.size();
    md.push_back({ "tokenizer.ggml.tokens", GgufValue::strings(v.tokens) });
    md.push_back({ "tokenizer.ggml.token_type", GgufValue::i32s(v.types) });
    md.push_back({ "tokenizer.ggml.merges", GgufValue::strings(std::move(merges)) });
    out.summary = "gpt2 (pre " + out.pre + "), " + std::to_string(out.tokens) + " tokens, " + std::to_string(mergeCount)
        + " merges";
    addSpecialIds(md, v, tokConfig, specialMap, config, {}, out.summary);
    return out;
}

Result<GgufTokenizer> fromSentencePiece(const ConfigFolder& folder, std::uint64_t vocabSize,
                                        const std::optional<json>& tokConfig, const std::optional<json>& specialMap,
                                        const json& config)
{
    const std::string file = folder.pathOf("tokenizer.model");
    auto bytes = folder.readText("tokenizer.model", kMaxTokenizerBytes);
    TESSERA_TRY(bytes);
    // No more pieces than the embedding has rows: checked while reading, before the vocabulary is built.
    auto sp = parseSentencePieceModel(*bytes, vocabSize ? vocabSize : SIZE_MAX);
    if (!sp)
        return sp.error().withContext(file + (vocabSize ? " (for an embedding of " + std::to_string(vocabSize)
                                                        + " rows)" : std::string()));
    GgufTokenizer out;
    Vocab v;
    for (std::size_t i = 0; i < sp->pieces.size(); ++i) {
        const auto& p = sp->pieces[i];
        v.tokens.push_back(p.text);
        v.scores.push_back(p.score);
        v.types.push_back(p.type >= 1 && p.type <= 6 ? static_cast<std::int64_t>(p.type) : static_cast<std::int64_t>(Normal));
        v.ids.emplace(p.text, static_cast<std::int64_t>(i));
    }
    // Tokens added on top of the SentencePiece model (added_tokens.json), as user-defined tokens.
    std::vector<std::string> problems;
    if (auto extra = readJson(folder, "added_tokens.json", problems); extra && extra->is_object()) {
        std::map<std::int64_t, std::string> byId;
        for (auto it = extra->begin(); it != extra->end(); ++it)
            if (it.value().is_number_integer())
                byId[it.value().get<std::int64_t>()] = it.key();
        for (const auto& [id, text] : byId) {
            if (id < static_cast<std::int64_t>(v.tokens.size())) {
                continue; // already a piece
            }
            if (id != static_cast<std::int64_t>(v.tokens.size()))
                return makeError(folder.pathOf("added_tokens.json") + ": token " + text + " has id "
                                 + std::to_string(id) + " but the vocabulary has " + std::to_string(v.tokens.size()));
            v.tokens.push_back(text);
            v.scores.push_back(-1000.0);
            v.types.push_back(UserDefined);
            v.ids.emplace(text, id);
        }
    }
    TESSERA_TRY(padVocab(v, vocabSize, true, file));
    out.model = "llama";
    out.pre = "default";
    out.tokens = v.tokens.size();
    auto& md = out.metadata;
    md.push_back({ "tokenizer.ggml.model", GgufValue::string("llama") });
    md.push_back({ "tokenizer.ggml.pre", GgufValue::string("default") });
    md.push_back({ "tokenizer.ggml.tokens", GgufValue::strings(v.tokens) });
    md.push_back({ "tokenizer.ggml.scores", GgufValue::f32s(v.scores) });
    md.push_back({ "tokenizer.ggml.token_type", GgufValue::i32s(v.types) });
    md.push_back({ "tokenizer.ggml.add_space_prefix", GgufValue::boolean(sp->addDummyPrefix) });
    out.summary = "llama (SentencePiece), " + std::to_string(out.tokens) + " tokens";
    addSpecialIds(md, v, tokConfig, specialMap, config,
                  { { "bos_token", sp->bosId }, { "eos_token", sp->eosId }, { "unk_token", sp->unkId },
                    { "pad_token", sp->padId } },
                  out.summary);
    out.warnings = problems;
    return out;
}

} // namespace

std::string ggufPreTokenizerForRegex(const std::string& regex)
{
    for (const auto& k : kKnownPre)
        if (regex == k.regex)
            return k.name;
    return {};
}

Result<GgufTokenizer> readGgufTokenizer(const ConfigFolder& folder, std::uint64_t vocabSize,
                                        const std::string& configJson)
{
    std::vector<std::string> problems;
    const auto tokConfig = readJson(folder, "tokenizer_config.json", problems);
    const auto specialMap = readJson(folder, "special_tokens_map.json", problems);
    json config = configJson.empty() ? json::object() : json::parse(configJson, nullptr, false);
    if (config.is_discarded())
        config = json::object();
    const auto tok = readJson(folder, "tokenizer.json", problems);
    if (!problems.empty())
        return makeError(problems.front());
    const bool hasSentencePiece = folder.has("tokenizer.model");
    Result<GgufTokenizer> result = makeError("");
    bool byteLevelBpe = false;
    if (tok && tok->is_object() && tok->contains("model") && (*tok)["model"].is_object()
        && (*tok)["model"].value("type", "BPE") == "BPE") {
        std::string regex;
        bool byteLevel = false, byteLevelRegex = false;
        if (tok->contains("pre_tokenizer"))
            scanPreTokenizer((*tok)["pre_tokenizer"], regex, byteLevel, byteLevelRegex);
        const bool byteDecoder = tok->contains("decoder") && (*tok)["decoder"].is_object()
            && (*tok)["decoder"].value("type", "") == "ByteLevel";
        byteLevelBpe = byteLevel || byteDecoder;
    }
    if (byteLevelBpe) {
        result = fromTokenizerJson(*tok, folder, vocabSize, tokConfig, specialMap, config);
    } else if (hasSentencePiece) {
        result = fromSentencePiece(folder, vocabSize, tokConfig, specialMap, config);
    } else if (tok) {
        return makeError(folder.pathOf("tokenizer.json")
                         + ": not a byte-level BPE tokenizer, and there is no tokenizer.model (SentencePiece) beside "
                           "it; Tessera writes GGUF tokenizers from those two only");
    } else {
        return makeError(folder.path + " has no tokenizer.json or tokenizer.model; llama.cpp cannot load a GGUF "
                         "without a tokenizer (give the folder with --hf_model_path)");
    }
    TESSERA_TRY(result);
    std::optional<bool> defaultAddBos;
    if (result->model == "llama")
        defaultAddBos = true; // SentencePiece llama tokenizers add <s> unless told otherwise
    addFlagsAndTemplate(result->metadata, tokConfig, folder, defaultAddBos, problems);
    // What was read, for the plan: the files whose content the GGUF file carries.
    for (const char* name : { "tokenizer_config.json", "special_tokens_map.json",
                              byteLevelBpe ? "tokenizer.json" : "tokenizer.model",
                              byteLevelBpe ? "" : "added_tokens.json", "chat_template.jinja" })
        if (folder.has(name))
            result->filesRead.push_back(name);
    for (const auto& p : problems)
        result->warnings.push_back(p);
    return result;
}

// ---------------------------------------------------------------------------------------------------------------
// SentencePiece's ModelProto, read field by field.

namespace {

class ProtoReader {
public:
    ProtoReader(const std::uint8_t* data, std::size_t size) : m_p(data), m_end(data + size) { }
    bool done() const { return m_p >= m_end; }
    Result<std::uint64_t> varint()
    {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (m_p >= m_end)
                return makeError("a number runs past the end of the data (truncated?)");
            const std::uint8_t b = *m_p++;
            v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
            if (!(b & 0x80))
                return v;
        }
        return makeError("a number is longer than 10 bytes (not a SentencePiece model?)");
    }
    /// The next field: (number, wire type); for length-delimited fields `bytes` is set.
    Result<std::pair<std::uint64_t, int>> field()
    {
        auto key = varint();
        TESSERA_TRY(key);
        return std::make_pair(*key >> 3, static_cast<int>(*key & 7));
    }
    Result<std::pair<const std::uint8_t*, std::size_t>> bytes()
    {
        auto n = varint();
        TESSERA_TRY(n);
        if (*n > static_cast<std::uint64_t>(m_end - m_p))
            return makeError("a field of " + std::to_string(*n) + " bytes runs past the end of the data (truncated?)");
        auto r = std::make_pair(m_p, static_cast<std::size_t>(*n));
        m_p += *n;
        return r;
    }
    Result<std::uint32_t> fixed32()
    {
        if (m_end - m_p < 4)
            return makeError("a 32-bit field runs past the end of the data");
        std::uint32_t v;
        std::memcpy(&v, m_p, 4);
        m_p += 4;
        return v;
    }
    Status skip(int wire)
    {
        switch (wire) {
        case 0: {
            auto v = varint();
            TESSERA_TRY(v);
            return Status::success();
        }
        case 1:
            if (m_end - m_p < 8)
                return makeError("a 64-bit field runs past the end of the data");
            m_p += 8;
            return Status::success();
        case 2: {
            auto b = bytes();
            TESSERA_TRY(b);
            return Status::success();
        }
        case 5: {
            auto f = fixed32();
            TESSERA_TRY(f);
            return Status::success();
        }
        default:
            return makeError("wire type " + std::to_string(wire) + " is not valid protobuf (not a SentencePiece model?)");
        }
    }

private:
    const std::uint8_t* m_p;
    const std::uint8_t* m_end;
};

} // namespace

Result<SentencePieceModel> parseSentencePieceModel(const std::string& data, std::size_t maxPieces)
{
    SentencePieceModel model;
    ProtoReader r(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    while (!r.done()) {
        auto f = r.field();
        TESSERA_TRY(f);
        const auto [number, wire] = *f;
        if (wire == 2 && (number == 1 || number == 2 || number == 3)) {
            auto b = r.bytes();
            TESSERA_TRY(b);
            ProtoReader sub(b->first, b->second);
            SentencePieceModel::Piece piece;
            while (!sub.done()) {
                auto g = sub.field();
                TESSERA_TRY(g);
                const auto [n, w] = *g;
                if (number == 1 && n == 1 && w == 2) {
                    auto s = sub.bytes();
                    TESSERA_TRY(s);
                    piece.text.assign(reinterpret_cast<const char*>(s->first), s->second);
                } else if (number == 1 && n == 2 && w == 5) {
                    auto v = sub.fixed32();
                    TESSERA_TRY(v);
                    std::memcpy(&piece.score, &*v, 4);
                } else if (w == 0 && ((number == 1 && n == 3) || (number == 2 && (n == 3 || (n >= 40 && n <= 43)))
                                      || (number == 3 && n == 3))) {
                    auto v = sub.varint();
                    TESSERA_TRY(v);
                    const int value = static_cast<int>(static_cast<std::int32_t>(*v));
                    if (number == 1)
                        piece.type = value;
                    else if (number == 3)
                        model.addDummyPrefix = value != 0;
                    else if (n == 3)
                        model.modelType = value;
                    else if (n == 40)
                        model.unkId = value;
                    else if (n == 41)
                        model.bosId = value;
                    else if (n == 42)
                        model.eosId = value;
                    else
                        model.padId = value;
                } else {
                    TESSERA_TRY(sub.skip(w));
                }
            }
            if (number == 1 && piece.text.empty())
                return makeError("piece " + std::to_string(model.pieces.size()) + " is empty (SentencePiece has none)");
            if (number == 1 && model.pieces.size() == maxPieces)
                return makeError("more than " + std::to_string(maxPieces) + " pieces");
            if (number == 1)
                model.pieces.push_back(std::move(piece));
        } else {
            TESSERA_TRY(r.skip(wire));
        }
    }
    if (model.pieces.empty())
        return makeError("no pieces (not a SentencePiece model?)");
    return model;
}

} // namespace tessera
