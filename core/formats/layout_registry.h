// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The one list of the layouts Tessera reads: each layout's name (CheckpointInfo::layout), the rule by which scan
// recognises it, its reader, and what users are told of it. Code outside formats/ asks this list about a layout
// (layoutFamily(), isMegatronLayout() …) instead of comparing its name with words of its own.

#include "model/checkpoint.h"
#include "progress.h"
#include "result.h"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

/// The names the readers give (CheckpointInfo::layout), spelled here once.
namespace layout_names {
inline constexpr char kVerlFsdp[] = "verl-fsdp";
inline constexpr char kDcp[] = "dcp";
inline constexpr char kMegatronDist[] = "megatron-dist";
inline constexpr char kMegatronLegacy[] = "megatron-legacy";
inline constexpr char kMegatronLm[] = "megatron-lm";
inline constexpr char kHfSafetensors[] = "hf-safetensors";
inline constexpr char kGguf[] = "gguf";
inline constexpr char kTorchSave[] = "torch-save";
} // namespace layout_names

/// The kind of checkpoint a layout is, for the stages above that treat every layout of a kind alike.
enum class LayoutFamily {
    Unknown,     ///< a name no reader gives (a planned split's preview, a model mapped to Hugging Face names)
    TorchSave,   ///< state dicts written by torch.save: verl's FSDP rank files, or one file
    Dcp,         ///< a PyTorch Distributed Checkpoint folder
    Megatron,    ///< Megatron's names and fused weights, mapped to Hugging Face's before anything is merged
    HuggingFace, ///< a Hugging Face model: its tensors and config as transformers reads them
    Gguf,        ///< a GGUF file, read back under Hugging Face names
};

using LayoutScan = Result<CheckpointInfo> (*)(const std::string& path, int threads, Progress& progress);
using PathRule = bool (*)(const std::filesystem::path& path);

/// One layout Tessera reads.
struct LayoutEntry {
    const char* name;        ///< CheckpointInfo::layout
    LayoutFamily family;
    const char* description; ///< for users: what it is and which files make it (the README's table of layouts)
    /// A folder of this layout, by its files and subfolders; null for a layout never recognised in a folder by a
    /// rule of its own (megatron-lm: megatron-legacy's reader reads both and tells them apart).
    PathRule folderRule;
    /// What "no checkpoint found" says scan looked for; null when the folder rule is not worth naming or absent.
    const char* lookedFor;
    /// Tried on a folder only after its subfolders (a run folder's actor/ before stray *.safetensors beside it).
    bool afterSubfolders;
    /// verl and Megatron keep it in a step folder's model/, dist_ckpt/ or model/dist_ckpt/, where scan looks too.
    bool inModelSubfolder;
    /// Its files sit in Megatron's per-rank folders mp_rank_XX[_YYY][_ZZZ].
    bool rankFolders;
    /// A file given directly that is of this layout; null for folder layouts.
    PathRule fileRule;
    LayoutScan scan;
};

/// Every layout, in the order scan tries them.
const std::vector<LayoutEntry>& layoutRegistry();

/// The entry of the layout named `name`; null for a name no reader gives.
const LayoutEntry* findLayout(std::string_view name);

/// The first layout whose folder rule holds for `dir`, among those tried before (or after) its subfolders; with
/// `inModelSubfolder`, among those kept in model/ or dist_ckpt/ only. Null when none holds.
const LayoutEntry* layoutOfFolder(const std::filesystem::path& dir, bool afterSubfolders, bool inModelSubfolder = false);

/// The layout a file given directly is read as.
const LayoutEntry& layoutOfFile(const std::filesystem::path& file);

/// What scan looks for in a folder, for the "no checkpoint found" message: "model_world_size_W_rank_R.pt files
/// (verl FSDP), a DCP folder (…), …".
std::string layoutsLookedFor();

LayoutFamily layoutFamily(std::string_view name);
/// True for the layouts whose names need mapping to Hugging Face's ("megatron-legacy", "megatron-lm",
/// "megatron-dist").
bool isMegatronLayout(std::string_view name);
/// True for a Hugging Face model read as it is (hf-safetensors), not for a model mapped to its names.
bool isHuggingFaceLayout(std::string_view name);
/// True for the layouts kept in Megatron's per-rank folders, whose ranks have TP/PP/EP coordinates.
bool hasMegatronRankFolders(std::string_view name);

} // namespace tessera
