// SPDX-License-Identifier: GPL-3.0-or-later
// Layout detection: from whatever folder the user points at to the reader that understands it.

#include "formats/scan.h"
#include "formats/run_steps.h"
#include "io/path_kinds.h"
#include "io/printable.h"
#include "io/text_file.h"

#include "formats/layout_registry.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// The tracker names one step; a few bytes. A bigger file (or /dev/zero behind a symlink) is not a tracker.
constexpr std::uint64_t kMaxTrackerBytes = 4096;

Result<std::string> readTrimmed(const fs::path& file)
{
    auto text = readTextFile(file.string(), kMaxTrackerBytes);
    TESSERA_TRY(text);
    const auto first = text->find_first_not_of(" \t\r\n");
    const auto last = text->find_last_not_of(" \t\r\n");
    return first == std::string::npos ? std::string() : text->substr(first, last - first + 1);
}

/// A step number from a tracker or folder name; nullopt when it is not digits or does not fit (a step number
/// of 20 digits is not a step anyone trained to).
std::optional<long long> parseStep(const std::string& digits)
{
    if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
        return std::nullopt;
    return std::strtoll(digits.c_str(), nullptr, 10);
}

/// The step folder a run root's tracker file points to (verl's global_step_N, Megatron's iter_NNNNNNN).
Result<fs::path> followTracker(const fs::path& root)
{
    const fs::path tracker = root / "latest_checkpointed_iteration.txt";
    auto read = readTrimmed(tracker);
    TESSERA_TRY(read);
    const std::string& step = *read;
    if (step.empty())
        return makeError(tracker.string() + ": empty; cannot tell which step to read");
    const bool plainName = std::all_of(step.begin(), step.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
    if (!plainName || step == "." || step == ".." || step.size() > 255)
        return makeError(tracker.string() + ": holds '" + printableText(step.substr(0, 80))
                         + "', which is not a step number or folder name");
    std::vector<fs::path> candidates { root / ("global_step_" + step), root / step };
    if (step == "release") {
        candidates.push_back(root / "release");
    } else if (const auto number = parseStep(step)) {
        char iter[32];
        std::snprintf(iter, sizeof iter, "iter_%07lld", *number);
        candidates.push_back(root / iter);
    }
    std::error_code ec;
    for (const auto& c : candidates)
        if (fs::is_directory(c, ec))
            return c;
    return makeError(tracker.string() + ": names step '" + step + "' but neither global_step_" + step
                     + " nor iter_" + step + " exists beside it");
}

/// The newest step folder (global_step_N, iter_N, step-N), for run roots without a tracker file.
fs::path newestStep(const fs::path& root)
{
    fs::path best;
    long long bestStep = -1;
    std::error_code ec;
    for (const auto& entry : folderEntries(root, ec))
        if (const auto step = stepOfFolderName(entry.path().filename().string());
            step && *step > bestStep && entry.is_directory(ec)) {
            bestStep = *step;
            best = entry.path();
        }
    return best;
}

/// Where verl puts config.json and the tokenizer next to a checkpoint: the first folder of that name holding a
/// config.json, from the innermost folder visited outwards.
struct FoundConfig {
    std::string dir;
    std::optional<Problem> outside; ///< the folder found is a link that leads out of the checkpoint
};

/// True when `dir`, with every link resolved, lies in `folder` (or is it).
bool liesIn(const fs::path& dir, const fs::path& folder)
{
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(dir, ec);
    const fs::path base = fs::weakly_canonical(folder, ec);
    if (ec)
        return false;
    const auto rel = real.lexically_relative(base);
    return !rel.empty() && *rel.begin() != "..";
}

FoundConfig findHfConfig(const std::vector<fs::path>& visited)
{
    for (auto it = visited.rbegin(); it != visited.rend(); ++it)
        for (const char* sub : { "huggingface", "model/huggingface", "hf_config_and_tokenizer", "hf_config", "" }) {
            const fs::path dir = *sub ? *it / sub : *it;
            std::error_code ec;
            if (!fs::exists(dir / "config.json", ec))
                continue;
            // Its files are copied into what Tessera writes: a folder of the checkpoint that is a link to some
            // other place (huggingface → ~/project) must not bring that place's files in unasked.
            if (!liesIn(dir, *it)) {
                const std::string real = fs::weakly_canonical(dir, ec).string();
                return { {}, Problem { dir.string(), "",
                                       "a symbolic link to " + real + ", outside the checkpoint: its config and "
                                       "tokenizer files are not used unasked; pass --hf_model_path " + real
                                           + " to use them" } };
            }
            return { absoluteNormal(dir).string(), std::nullopt };
        }
    return {};
}

Result<CheckpointInfo> dispatch(const fs::path& path, const ScanOptions& options, Progress& progress,
                                std::vector<fs::path>& visited, int hops)
{
    if (hops > 8)
        return makeError(path.string() + ": the folder structure nests too deeply to detect a layout");
    std::error_code ec;
    if (!fs::exists(path, ec))
        return makeError(path.string() + (ec ? ": " + ec.message() : std::string(": no such file or folder")));
    if (fs::is_regular_file(path, ec)) {
        if (path.filename() == ".metadata")
            return dispatch(path.parent_path(), options, progress, visited, hops + 1);
        return layoutOfFile(path).scan(path.string(), options.threads, progress);
    }
    if (!fs::is_directory(path, ec))
        return makeError(path.string() + ": neither a file nor a folder");
    visited.push_back(path);

    // The layouts recognised by the folder's own files, then the folders below that lead to one, then the
    // layouts that only count when nothing below does, then the newest step folder.
    if (const LayoutEntry* layout = layoutOfFolder(path, false))
        return layout->scan(path.string(), options.threads, progress);
    for (const char* sub : { "model/dist_ckpt", "dist_ckpt", "model" })
        if (isFolder(path / sub) && layoutOfFolder(path / sub, false, true))
            return dispatch(path / sub, options, progress, visited, hops + 1);
    if (existsFollowingLinks(path / "latest_checkpointed_iteration.txt")) {
        auto step = followTracker(path);
        TESSERA_TRY(step);
        return dispatch(*step, options, progress, visited, hops + 1);
    }
    for (const char* role : { "actor", "critic" })
        if (isFolder(path / role))
            return dispatch(path / role, options, progress, visited, hops + 1);
    if (const LayoutEntry* layout = layoutOfFolder(path, true))
        return layout->scan(path.string(), options.threads, progress);
    if (auto newest = newestStep(path); !newest.empty())
        return dispatch(newest, options, progress, visited, hops + 1);
    return makeError(path.string() + ": no checkpoint found. Tessera looks for " + layoutsLookedFor()
                     + ", or a run folder with latest_checkpointed_iteration.txt");
}

} // namespace

Result<CheckpointInfo> scanCheckpoint(const std::string& path, const ScanOptions& options, Progress& progress)
{
    std::vector<fs::path> visited;
    auto info = dispatch(fs::path(path), options, progress, visited, 0);
    TESSERA_TRY(info);
    std::optional<Problem> problem;
    if (!options.hfModelPath.empty()) {
        if (!existsFollowingLinks(fs::path(options.hfModelPath) / "config.json"))
            problem = Problem { options.hfModelPath, "", "no config.json in the --hf_model_path folder" };
        info->hfConfigDir = absoluteNormal(options.hfModelPath).string();
    } else if (info->hfConfigDir.empty()) {
        auto found = findHfConfig(visited);
        info->hfConfigDir = found.dir;
        problem = found.outside;
    }
    if (problem)
        info->problems.push_back(*problem);
    // The model the optimizer's master weights make is read with the same config folder.
    if (const auto& weights = info->optimizer.masterWeights) {
        CheckpointInfo same = *weights;
        same.hfConfigDir = info->hfConfigDir;
        if (problem)
            same.problems.push_back(*problem);
        info->optimizer.masterWeights = std::make_shared<const CheckpointInfo>(std::move(same));
    }
    return info;
}

} // namespace tessera
