// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/layout_registry.h"

#include "formats/gguf_reader.h"
#include "formats/layouts.h"
#include "formats/safetensors_reader.h"
#include "io/path_kinds.h"
#include "io/regex.h"

namespace fs = std::filesystem;

namespace tessera {

namespace {

bool hasFileMatching(const fs::path& dir, const Regex& pattern)
{
    std::error_code ec;
    for (const auto& entry : folderEntries(dir, ec))
        if (pattern.fullMatch(entry.path().filename().string()))
            return true;
    return false;
}

bool hasSubdirMatching(const fs::path& dir, const Regex& pattern)
{
    std::error_code ec;
    for (const auto& entry : folderEntries(dir, ec))
        if (entry.is_directory(ec) && pattern.fullMatch(entry.path().filename().string()))
            return true;
    return false;
}

bool hasFsdpRankFiles(const fs::path& dir)
{
    static const Regex fsdpFile = Regex::fixed(R"(model_world_size_\d+_rank_\d+\.pt)");
    return hasFileMatching(dir, fsdpFile);
}

// DCP and torch_dist both keep a .metadata; torch_dist adds Megatron's metadata.json.
bool isDcpFolder(const fs::path& dir)
{
    return existsFollowingLinks(dir / ".metadata") && !existsFollowingLinks(dir / "metadata.json");
}

bool isMegatronDistFolder(const fs::path& dir)
{
    return existsFollowingLinks(dir / ".metadata") && existsFollowingLinks(dir / "metadata.json");
}

bool hasMpRankFolders(const fs::path& dir)
{
    static const Regex mpRank = Regex::fixed(R"(mp_rank_\d\d(_\d\d\d)?(_\d\d\d)?)");
    return hasSubdirMatching(dir, mpRank);
}

bool hasSafetensorsFiles(const fs::path& dir)
{
    static const Regex safetensorsFile = Regex::fixed(R"(.*\.safetensors)");
    return hasFileMatching(dir, safetensorsFile);
}

bool isSafetensorsFile(const fs::path& file) { return file.extension() == ".safetensors"; }
bool isGgufFile(const fs::path& file) { return file.extension() == ".gguf"; }
bool anyFile(const fs::path&) { return true; }

// The readers that take neither threads nor progress: one file, or a folder's headers only.
Result<CheckpointInfo> readSafetensors(const std::string& path, int, Progress&) { return scanSafetensorsFolder(path); }
Result<CheckpointInfo> readGguf(const std::string& path, int, Progress&) { return scanGgufFile(path); }
Result<CheckpointInfo> readTorchSave(const std::string& path, int, Progress&) { return scanTorchSaveFile(path); }

} // namespace

const std::vector<LayoutEntry>& layoutRegistry()
{
    // A new layout is one row here (and its reader beside it). Fields: name, family, description, folder rule,
    // looked for, after subfolders, in model/ or dist_ckpt/, per-rank folders, file rule, reader.
    static const std::vector<LayoutEntry> layouts {
        { layout_names::kVerlFsdp, LayoutFamily::TorchSave,
          "verl FSDP / FSDP2 / HSDP actor or critic folders: model_world_size_W_rank_R.pt (DTensor, ShardedTensor or "
          "plain tensors)",
          hasFsdpRankFiles, "model_world_size_W_rank_R.pt files (verl FSDP)", false, false, false, nullptr,
          scanVerlFsdp },
        { layout_names::kDcp, LayoutFamily::Dcp,
          "PyTorch Distributed Checkpoint folders: .metadata + __R_I.distcp (torchtitan, accelerate)", isDcpFolder,
          "a DCP folder (.metadata + *.distcp)", false, true, false, nullptr, scanDcp },
        { layout_names::kMegatronDist, LayoutFamily::Megatron,
          "Megatron-core torch_dist (DCP + metadata.json + common.pt), verl's dist_ckpt/", isMegatronDistFolder,
          "a Megatron torch_dist folder (.metadata + metadata.json, verl's dist_ckpt/)", false, true, false, nullptr,
          scanMegatronDist },
        { layout_names::kMegatronLegacy, LayoutFamily::Megatron,
          "verl's Megatron per-rank folders mp_rank_XX[_YYY][_ZZZ] with model.pt (a list of state dicts, one per "
          "virtual stage)",
          hasMpRankFolders, "Megatron mp_rank_* folders", false, true, true, nullptr, scanMegatronPerRank },
        { layout_names::kMegatronLm, LayoutFamily::Megatron,
          "Megatron-LM's per-rank folders mp_rank_XX[_YYY] with model_optim_rng.pt (model, or model0, model1 … for "
          "VPP, beside args)",
          nullptr, nullptr, false, false, true, nullptr, scanMegatronPerRank },
        { layout_names::kHfSafetensors, LayoutFamily::HuggingFace,
          "Hugging Face folders: model.safetensors or shards with model.safetensors.index.json (or one .safetensors "
          "file)",
          hasSafetensorsFiles, "*.safetensors", true, false, false, isSafetensorsFile, readSafetensors },
        { layout_names::kGguf, LayoutFamily::Gguf,
          "a GGUF file (llama.cpp, Ollama), read back under Hugging Face names", nullptr, nullptr, false, false, false,
          isGgufFile, readGguf },
        // Last among the files: any other file is tried as torch.save, which says what it is when it is not one.
        { layout_names::kTorchSave, LayoutFamily::TorchSave, "a single torch.save file holding a state dict", nullptr,
          nullptr, false, false, false, anyFile, readTorchSave },
    };
    return layouts;
}

const LayoutEntry* findLayout(std::string_view name)
{
    for (const auto& entry : layoutRegistry())
        if (name == entry.name)
            return &entry;
    return nullptr;
}

const LayoutEntry* layoutOfFolder(const fs::path& dir, bool afterSubfolders, bool inModelSubfolder)
{
    for (const auto& entry : layoutRegistry())
        if (entry.folderRule && entry.afterSubfolders == afterSubfolders
            && (!inModelSubfolder || entry.inModelSubfolder) && entry.folderRule(dir))
            return &entry;
    return nullptr;
}

const LayoutEntry& layoutOfFile(const fs::path& file)
{
    for (const auto& entry : layoutRegistry())
        if (entry.fileRule && entry.fileRule(file))
            return entry;
    return layoutRegistry().back(); // not reached: torch-save's rule takes any file
}

std::string layoutsLookedFor()
{
    std::string text;
    for (const auto& entry : layoutRegistry())
        if (entry.lookedFor)
            text += (text.empty() ? "" : ", ") + std::string(entry.lookedFor);
    return text;
}

LayoutFamily layoutFamily(std::string_view name)
{
    const LayoutEntry* entry = findLayout(name);
    return entry ? entry->family : LayoutFamily::Unknown;
}

bool isMegatronLayout(std::string_view name) { return layoutFamily(name) == LayoutFamily::Megatron; }

bool isHuggingFaceLayout(std::string_view name) { return layoutFamily(name) == LayoutFamily::HuggingFace; }

bool hasMegatronRankFolders(std::string_view name)
{
    const LayoutEntry* entry = findLayout(name);
    return entry && entry->rankFolders;
}

} // namespace tessera
