// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/lora.h"
#include "mapping/lora_config.h"
#include "mapping/peft_names.h"

#include "io/printable.h"
#include "io/text_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using nlohmann::json;

namespace tessera {

namespace {

constexpr const char* kAdapterNote = "LoRA adapter: ";

/// A small JSON object file, or nothing when the file is absent. A file that is there but unreadable or not an
/// object is an error: a wrong α would silently change every fused weight.
Result<std::optional<json>> readJsonObject(const fs::path& path)
{
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec)))
        return std::optional<json>();
    auto text = readTextFile(path.string(), 1u << 20);
    TESSERA_TRY(text);
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError(path.string() + ": not a JSON object");
    return std::optional<json>(std::move(j));
}

/// Where the checkpoint's LoRA facts may be: verl writes lora_train_meta.json into the actor folder, older verl
/// an adapter folder there too; a user may point at the folder above or below.
std::vector<fs::path> metaFolders(const CheckpointInfo& info)
{
    std::vector<fs::path> folders;
    const fs::path root(info.root);
    std::error_code ec;
    if (fs::is_directory(root, ec))
        folders.push_back(root);
    else
        folders.push_back(root.parent_path());
    folders.push_back(folders.front().parent_path());
    return folders;
}

struct FoundConfig {
    std::optional<double> alpha, r;
    std::optional<bool> rslora;
    std::string taskType;
    std::string alphaSource, rSource;
    std::string configText;
};

Result<FoundConfig> findLoraConfig(const CheckpointInfo& info)
{
    FoundConfig found;
    for (const auto& folder : metaFolders(info)) {
        for (const fs::path& file : { folder / "lora_train_meta.json", folder / "lora_adapter" / "adapter_config.json",
                                      folder / "adapter_config.json" }) {
            auto j = readJsonObject(file);
            TESSERA_TRY(j);
            if (!*j)
                continue;
            const json& o = **j;
            auto facts = readLoraConfigObject(o, file.string());
            TESSERA_TRY(facts);
            if (facts->alpha && !found.alpha) {
                found.alpha = facts->alpha;
                found.alphaSource = file.string();
            }
            if (facts->r && !found.r) {
                found.r = static_cast<double>(*facts->r);
                found.rSource = file.string();
            }
            if (facts->useRslora && !found.rslora)
                found.rslora = facts->useRslora;
            if (!facts->taskType.empty() && found.taskType.empty())
                found.taskType = facts->taskType;
            if (file.filename() == "adapter_config.json" && found.configText.empty())
                found.configText = o.dump();
        }
    }
    return found;
}

std::string shapeText(const TensorInfo& t) { return t.name + " " + shapeToString(t.shape); }

} // namespace

bool hasLoraTensors(const CheckpointInfo& info)
{
    return std::any_of(info.tensors.begin(), info.tensors.end(), [](const TensorInfo& t) {
        const auto kind = parsePeftName(t.name).kind;
        return isLoraFactor(kind) || kind == PeftName::Kind::Base || kind == PeftName::Kind::Unsupported;
    });
}

std::vector<std::string> loraBaseWeightNames(const CheckpointInfo& info)
{
    std::vector<std::string> names;
    bool base = false; // adapter-only (save_lora_only) holds factors and trained copies, no base weight
    for (const auto& t : info.tensors) {
        const PeftName n = parsePeftName(t.name);
        base = base || n.kind == PeftName::Kind::Base || n.kind == PeftName::Kind::Plain;
        if (n.kind == PeftName::Kind::Base || n.kind == PeftName::Kind::Plain || n.kind == PeftName::Kind::SavedCopy)
            names.push_back(n.plainName());
    }
    return base ? names : std::vector<std::string>();
}

namespace {

/// The checkpoint's tensors sorted by what PEFT makes of them; the pointers are into the checkpoint's tensors.
struct PeftTensors {
    struct Factors {
        const TensorInfo* a = nullptr;
        const TensorInfo* b = nullptr;
        bool embedding = false;
    };
    std::set<std::string> adapterNames;
    std::map<std::string, Factors> byModule; // module → factors
    std::vector<std::string> moduleOrder;
    std::vector<std::pair<const TensorInfo*, PeftName>> baseTensors; // the checkpoint's own base weights
    std::vector<std::pair<const TensorInfo*, PeftName>> savedCopies;
    std::vector<std::string> unsupported;
};

/// Sorts the tensors by their PEFT names, recording each base weight's Hugging Face name in `lora.baseNames`.
PeftTensors sortPeftTensors(const CheckpointInfo& info, LoraCheckpoint& lora)
{
    PeftTensors sorted;
    for (const auto& t : info.tensors) {
        PeftName n = parsePeftName(t.name);
        switch (n.kind) {
        case PeftName::Kind::Unsupported:
            sorted.unsupported.push_back(printableText(t.name) + ": " + n.param);
            break;
        case PeftName::Kind::LoraA:
        case PeftName::Kind::LoraB:
        case PeftName::Kind::EmbeddingA:
        case PeftName::Kind::EmbeddingB: {
            if (!n.adapter.empty())
                sorted.adapterNames.insert(n.adapter);
            auto [it, inserted] = sorted.byModule.try_emplace(n.module);
            if (inserted)
                sorted.moduleOrder.push_back(n.module);
            const bool isA = n.kind == PeftName::Kind::LoraA || n.kind == PeftName::Kind::EmbeddingA;
            const bool embedding = n.kind == PeftName::Kind::EmbeddingA || n.kind == PeftName::Kind::EmbeddingB;
            const TensorInfo*& slot = isA ? it->second.a : it->second.b;
            if (slot)
                sorted.unsupported.push_back(printableText(t.name) + ": a second " + (isA ? "A" : "B") + " factor for "
                                             + printableText(n.module)
                                             + " (several adapters in one checkpoint are not supported)");
            slot = &t;
            it->second.embedding = embedding;
            break;
        }
        case PeftName::Kind::SavedCopy:
            if (!n.adapter.empty())
                sorted.adapterNames.insert(n.adapter);
            lora.baseNames[t.name] = n.plainName();
            sorted.savedCopies.emplace_back(&t, std::move(n));
            break;
        case PeftName::Kind::OriginalCopy:
            lora.baseNames[t.name] = ""; // the frozen original of a module trained in full: its copy replaces it
            break;
        case PeftName::Kind::Base:
        case PeftName::Kind::Plain:
            lora.baseNames[t.name] = n.plainName();
            sorted.baseTensors.emplace_back(&t, std::move(n));
            break;
        }
    }
    return sorted;
}

/// Refuses what cannot be merged: unsupported tensors, no factors at all, several adapters.
Status checkPeftTensors(const CheckpointInfo& info, const PeftTensors& sorted)
{
    if (!sorted.unsupported.empty()) {
        std::string message = info.root + ": " + std::to_string(sorted.unsupported.size())
            + " LoRA tensor(s) cannot be merged:";
        for (std::size_t i = 0; i < sorted.unsupported.size() && i < 10; ++i)
            message += "\n  " + sorted.unsupported[i];
        return makeError(message);
    }
    if (sorted.byModule.empty())
        return makeError(info.root + ": no LoRA factors (lora_A/lora_B) were found");
    if (sorted.adapterNames.size() > 1) {
        std::string names;
        for (const auto& a : sorted.adapterNames)
            names += (names.empty() ? "'" : ", '") + printableText(a) + "'";
        return makeError(info.root + ": the checkpoint holds several adapters (" + names
                         + "); only a checkpoint with one adapter can be merged");
    }
    return Status::success();
}

/// Hyper-parameters: the user, then the checkpoint's files; the rank is the shapes' (they are the truth). Returns
/// what the files say, for the rank check.
Result<FoundConfig> settleHyperParameters(const CheckpointInfo& info, const LoraSettings& settings,
                                          LoraCheckpoint& lora)
{
    auto found = findLoraConfig(info);
    TESSERA_TRY(found);
    if (settings.alpha) {
        if (const std::string why = loraAlphaProblem(*settings.alpha); !why.empty())
            return makeError("--lora_alpha " + why);
        lora.config.alpha = *settings.alpha;
        lora.config.alphaSource = "--lora_alpha";
    } else if (found->alpha) {
        lora.config.alpha = *found->alpha;
        lora.config.alphaSource = found->alphaSource;
    } else {
        return makeError(info.root + ": the LoRA scale alpha is not recorded (no lora_train_meta.json or "
                                     "adapter_config.json with \"lora_alpha\" beside the checkpoint); pass --lora_alpha "
                                     "with the value used in training (fusing with a guessed alpha would silently "
                                     "change every adapted weight)");
    }
    lora.config.useRslora = settings.useRslora.value_or(found->rslora.value_or(false));
    lora.config.taskType = found->taskType.empty() ? "CAUSAL_LM" : found->taskType;
    lora.config.configText = found->configText;
    return found;
}

/// The modules, checked pair by pair; each complete pair becomes a LoraModule, counted in `ranks` and `targets`.
Status collectModules(const CheckpointInfo& info, const PeftTensors& sorted, LoraCheckpoint& lora,
                      std::map<std::int64_t, int>& ranks, std::set<std::string>& targets)
{
    std::vector<std::string> errors;
    for (const auto& module : sorted.moduleOrder) {
        const PeftTensors::Factors& f = sorted.byModule.at(module);
        const std::string shown = printableText(module);
        if (!f.a || !f.b) {
            errors.push_back(shown + ": lora_" + std::string(f.a ? "B" : "A") + " is missing (only "
                             + printableText((f.a ? f.a : f.b)->name) + " is in the checkpoint)");
            continue;
        }
        if (f.a->shape.size() != 2 || f.b->shape.size() != 2 || f.a->shape[0] != f.b->shape[1] || f.a->shape[0] <= 0) {
            errors.push_back(shown + ": the factors' shapes do not fit a rank-r update (" + shapeText(*f.a) + ", "
                             + shapeText(*f.b) + ")");
            continue;
        }
        if (!isFloatingPoint(f.a->dtype) || !isFloatingPoint(f.b->dtype) || dtypeSize(f.a->dtype) < 2
            || dtypeSize(f.b->dtype) < 2) {
            errors.push_back(shown + ": the factors are " + std::string(torchName(f.a->dtype)) + " and "
                             + std::string(torchName(f.b->dtype)) + "; only float16, bfloat16, float32 and float64 "
                             + "factors can be fused");
            continue;
        }
        LoraModule m;
        m.module = module;
        m.weight = module + ".weight";
        m.sourceA = f.a->name;
        m.sourceB = f.b->name;
        m.embedding = f.embedding;
        m.adapterA = kPeftPrefix + module + (f.embedding ? ".lora_embedding_A" : ".lora_A.weight");
        m.adapterB = kPeftPrefix + module + (f.embedding ? ".lora_embedding_B" : ".lora_B.weight");
        m.rank = f.a->shape[0];
        const double r = static_cast<double>(m.rank);
        m.scale = lora.config.alpha / (lora.config.useRslora ? std::sqrt(r) : r);
        ranks[m.rank]++;
        const auto dot = module.rfind('.');
        targets.insert(dot == std::string::npos ? module : module.substr(dot + 1));
        lora.modules.push_back(std::move(m));
    }
    if (!errors.empty()) {
        std::string message = info.root + ": " + std::to_string(errors.size()) + " LoRA module(s) are incomplete:";
        for (std::size_t i = 0; i < errors.size() && i < 10; ++i)
            message += "\n  " + errors[i];
        return makeError(message);
    }
    return Status::success();
}

/// The rank from the factors' shapes (one for all modules), the target modules, and the summary line.
Status settleRank(const CheckpointInfo& info, const std::map<std::int64_t, int>& ranks,
                  const std::set<std::string>& targets, const FoundConfig& found, LoraCheckpoint& lora)
{
    lora.config.targetModules.assign(targets.begin(), targets.end());
    lora.config.r = std::max_element(ranks.begin(), ranks.end(), [](const auto& x, const auto& y) {
                        return x.second < y.second;
                    })->first;
    lora.config.rSource = "the shapes of the LoRA factors";
    if (ranks.size() > 1)
        return makeError(info.root + ": the LoRA modules have different ranks (" + std::to_string(ranks.size())
                         + " distinct); adapters with a per-module rank are not supported yet");
    if (found.r && static_cast<std::int64_t>(*found.r) != lora.config.r)
        lora.notes.push_back(found.rSource + " says r = " + std::to_string(static_cast<std::int64_t>(*found.r))
                             + " but the factors have rank " + std::to_string(lora.config.r)
                             + "; the factors' rank is used");
    std::ostringstream note;
    note << kAdapterNote << lora.modules.size() << " modules (";
    for (std::size_t i = 0; i < lora.config.targetModules.size(); ++i)
        note << (i ? ", " : "") << lora.config.targetModules[i];
    note << "), r = " << lora.config.r << ", alpha = " << lora.config.alpha << " (from " << lora.config.alphaSource
         << ")" << (lora.config.useRslora ? ", rsLoRA" : "");
    lora.summary = note.str();
    return Status::success();
}

/// The adapter as PEFT saves it.
void buildAdapter(const CheckpointInfo& info, const PeftTensors& sorted, LoraCheckpoint& lora)
{
    lora.adapter.layout = info.layout;
    lora.adapter.root = info.root;
    lora.adapter.parallel = info.parallel;
    lora.adapter.files = info.files;
    lora.adapter.notes = info.notes;
    // What is wrong with the checkpoint's files, or with a factor or trained copy, is wrong with the adapter; a
    // base weight's problem (missing, incomplete) only with the fused model, which gets every problem below.
    std::set<std::string> adapterSources;
    for (const auto& m : lora.modules)
        adapterSources.insert({ m.sourceA, m.sourceB });
    for (const auto& [t, n] : sorted.savedCopies)
        adapterSources.insert(t->name);
    for (const auto& p : info.problems)
        if (p.tensor.empty() || adapterSources.count(p.tensor))
            lora.adapter.problems.push_back(p);
    for (const auto& m : lora.modules) {
        TensorInfo a = *info.find(m.sourceA);
        a.name = m.adapterA;
        TensorInfo b = *info.find(m.sourceB);
        b.name = m.adapterB;
        lora.adapter.tensors.push_back(std::move(a));
        lora.adapter.tensors.push_back(std::move(b));
    }
    for (const auto& [t, n] : sorted.savedCopies) {
        TensorInfo copy = *t;
        copy.name = kPeftPrefix + n.plainName();
        lora.adapter.tensors.push_back(std::move(copy));
    }
}

/// The base weights: the checkpoint's own, or --base_model's for an adapter-only checkpoint, into `lora.fused`.
/// False when there are none (adapter-only without --base_model): only the adapter can be written.
bool takeBaseWeights(const CheckpointInfo& info, const CheckpointInfo* base, const PeftTensors& sorted,
                     LoraCheckpoint& lora)
{
    lora.adapterOnly = sorted.baseTensors.empty();
    if (!lora.adapterOnly) {
        lora.fused.layout = info.layout;
        lora.fused.root = info.root;
        lora.fused.hfConfigDir = info.hfConfigDir;
        lora.fused.parallel = info.parallel;
        lora.fused.files = info.files;
        lora.fused.notes = info.notes;
        lora.fused.problems = info.problems;
        lora.fused.warnings = info.warnings;
        for (const auto& [t, n] : sorted.baseTensors) {
            TensorInfo renamed = *t;
            renamed.name = n.plainName();
            lora.fused.tensors.push_back(std::move(renamed));
        }
        if (base)
            lora.notes.push_back("the checkpoint holds its base weights; --base_model is not used");
    } else if (base) {
        lora.fused = *base;
        if (lora.fused.hfConfigDir.empty())
            lora.fused.hfConfigDir = info.hfConfigDir;
        lora.fused.problems.insert(lora.fused.problems.end(), info.problems.begin(), info.problems.end());
        lora.notes.push_back("adapter-only checkpoint: base weights from " + base->root);
    } else {
        lora.notes.push_back("adapter-only checkpoint (save_lora_only): it holds no base weights, so only the adapter "
                             "is written; pass --base_model with the base model's Hugging Face folder (e.g. the "
                             "checkpoint's huggingface/ folder or the model trained from) to also write the fused model");
        return false;
    }
    return true;
}

/// Trained copies (modules_to_save) replace the frozen originals in the fused model.
void replaceSavedCopies(const PeftTensors& sorted, LoraCheckpoint& lora)
{
    for (const auto& [t, n] : sorted.savedCopies) {
        TensorInfo copy = *t;
        copy.name = n.plainName();
        auto it = std::find_if(lora.fused.tensors.begin(), lora.fused.tensors.end(),
                               [&](const TensorInfo& x) { return x.name == copy.name; });
        if (it != lora.fused.tensors.end())
            *it = std::move(copy);
        else
            lora.fused.tensors.push_back(std::move(copy));
    }
}

/// Adds each module's factors and update to the fused model, once its base weight is found with the update's shape.
Status addFusedUpdates(const CheckpointInfo& info, LoraCheckpoint& lora)
{
    const CheckpointInfo* baseInfo = &lora.fused;
    std::vector<std::string> errors;
    for (const auto& m : lora.modules) {
        const TensorInfo* w = baseInfo->find(m.weight);
        const TensorInfo& a = *info.find(m.sourceA);
        const TensorInfo& b = *info.find(m.sourceB);
        if (!w) {
            errors.push_back(printableText(m.weight) + " (adapted by " + printableText(m.sourceA)
                             + ") is not in the base model");
            continue;
        }
        // W [out, in] = B [out, r] · A [r, in]; an embedding's W [num, dim] = (B [dim, r] · A [r, num])ᵀ.
        const std::int64_t rows = m.embedding ? a.shape[1] : b.shape[0];
        const std::int64_t cols = m.embedding ? b.shape[0] : a.shape[1];
        if (w->shape != Shape { rows, cols }) {
            errors.push_back(printableText(m.weight) + " is " + shapeToString(w->shape) + " but its LoRA factors ("
                             + shapeText(a) + ", " + shapeText(b) + ") make an update of " + shapeToString({ rows, cols }));
            continue;
        }
        TensorInfo fa = a;
        fa.name = m.adapterA;
        TensorInfo fb = b;
        fb.name = m.adapterB;
        lora.fused.tensors.push_back(std::move(fa));
        lora.fused.tensors.push_back(std::move(fb));
        lora.fused.loraDeltas.push_back({ m.weight, m.adapterA, m.adapterB, m.scale, m.embedding });
    }
    if (!errors.empty()) {
        std::string message = "the LoRA adapter does not fit the base model (" + std::to_string(errors.size())
            + " module(s)):";
        for (std::size_t i = 0; i < errors.size() && i < 10; ++i)
            message += "\n  " + errors[i];
        return makeError(message);
    }
    return Status::success();
}

} // namespace

Result<LoraCheckpoint> readLoraCheckpoint(const CheckpointInfo& info, const LoraSettings& settings,
                                          const CheckpointInfo* base)
{
    if (base && hasLoraTensors(*base))
        return makeError(base->root + ": the base model holds LoRA tensors itself; give the plain base model (a "
                                      "Hugging Face folder without base_layer/lora_ names)");
    LoraCheckpoint lora;
    const PeftTensors sorted = sortPeftTensors(info, lora);
    TESSERA_TRY(checkPeftTensors(info, sorted));
    lora.config.adapterName = sorted.adapterNames.empty() ? "default" : *sorted.adapterNames.begin();

    auto found = settleHyperParameters(info, settings, lora);
    TESSERA_TRY(found);
    std::map<std::int64_t, int> ranks;
    std::set<std::string> targets;
    TESSERA_TRY(collectModules(info, sorted, lora, ranks, targets));
    TESSERA_TRY(settleRank(info, ranks, targets, *found, lora));

    buildAdapter(info, sorted, lora);
    if (!takeBaseWeights(info, base, sorted, lora))
        return lora;
    replaceSavedCopies(sorted, lora);
    TESSERA_TRY(addFusedUpdates(info, lora));
    lora.hasBase = true;
    return lora;
}

std::vector<std::string> loraSummaryLines(const CheckpointInfo& info)
{
    if (!hasLoraTensors(info))
        return {};
    auto lora = readLoraCheckpoint(info, {});
    if (!lora)
        return { "cannot be merged as it is: " + lora.error().message };
    // The summary's heading already says LoRA.
    std::vector<std::string> lines { "adapter: " + lora->summary.substr(std::string(kAdapterNote).size()) };
    lines.insert(lines.end(), lora->notes.begin(), lora->notes.end());
    if (lora->hasBase)
        lines.push_back("tessera merge writes the fused model (" + std::to_string(lora->modules.size())
                        + " weights updated) and the PEFT adapter in lora_adapter/ (--lora chooses)");
    return lines;
}

std::string LoraCheckpoint::adapterConfigJson() const
{
    json j = config.configText.empty() ? json::object() : json::parse(config.configText, nullptr, false);
    if (!j.is_object())
        j = json::object();
    // The fields PEFT's LoraConfig reads back; what an older adapter_config.json had beside them is kept.
    const json defaults = { { "alpha_pattern", json::object() },
                            { "auto_mapping", nullptr },
                            { "base_model_name_or_path", nullptr },
                            { "bias", "none" },
                            { "fan_in_fan_out", false },
                            { "inference_mode", true },
                            { "init_lora_weights", true },
                            { "layer_replication", nullptr },
                            { "layers_pattern", nullptr },
                            { "layers_to_transform", nullptr },
                            { "lora_dropout", 0.0 },
                            { "megatron_config", nullptr },
                            { "megatron_core", "megatron.core" },
                            { "modules_to_save", nullptr },
                            { "rank_pattern", json::object() },
                            { "revision", nullptr },
                            { "use_dora", false } };
    for (const auto& [key, value] : defaults.items())
        if (!j.contains(key))
            j[key] = value;
    j["peft_type"] = "LORA";
    j["r"] = config.r;
    if (config.alpha == std::floor(config.alpha) && std::fabs(config.alpha) < 1e15)
        j["lora_alpha"] = static_cast<std::int64_t>(config.alpha);
    else
        j["lora_alpha"] = config.alpha;
    j["use_rslora"] = config.useRslora;
    j["target_modules"] = config.targetModules;
    j["task_type"] = config.taskType;
    std::set<std::string> saved;
    for (const auto& t : adapter.tensors) {
        const std::string rest = t.name.substr(std::string(kPeftPrefix).size());
        if (rest.find(".lora_") == std::string::npos) {
            const auto dot = rest.rfind('.');
            const std::string module = rest.substr(0, dot);
            const auto last = module.rfind('.');
            saved.insert(last == std::string::npos ? module : module.substr(last + 1));
        }
    }
    if (!saved.empty())
        j["modules_to_save"] = std::vector<std::string>(saved.begin(), saved.end());
    return j.dump(2) + "\n";
}

} // namespace tessera
