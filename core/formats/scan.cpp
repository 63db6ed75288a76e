// SPDX-License-Identifier: GPL-3.0-or-later
// Layout detection: from whatever folder the user points at to the reader that understands it.

#include "formats/scan.h"
#include "io/text_file.h"

#include "formats/layouts.h"
#include "formats/safetensors_reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

namespace fs = std::filesystem;

namespace tessera {

namespace {

bool hasFileMatching(const fs::path& dir, const std::regex& pattern)
{
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec))
        if (std::regex_match(entry.path().filename().string(), pattern))
            return true;
    return false;
}

bool hasSubdirMatching(const fs::path& dir, const std::regex& pattern)
{
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.is_directory(ec) && std::regex_match(entry.path().filename().string(), pattern))
            return true;
    return false;
}

std::string readTrimmed(const fs::path& file)
{
    const std::string text = readTextFile(file.string()).value_or(std::string());
    const auto first = text.find_first_not_of(" \t\r\n");
    const auto last = text.find_last_not_of(" \t\r\n");
    return first == std::string::npos ? std::string() : text.substr(first, last - first + 1);
}

/// The step folder a run root's tracker file points to (verl's global_step_N, Megatron's iter_NNNNNNN).
Result<fs::path> followTracker(const fs::path& root)
{
    const fs::path tracker = root / "latest_checkpointed_iteration.txt";
    const std::string step = readTrimmed(tracker);
    if (step.empty())
        return makeError(tracker.string() + ": empty; cannot tell which step to read");
    std::vector<fs::path> candidates { root / ("global_step_" + step), root / step };
    if (step == "release") {
        candidates.push_back(root / "release");
    } else if (std::all_of(step.begin(), step.end(), ::isdigit)) {
        char iter[32];
        std::snprintf(iter, sizeof iter, "iter_%07lld", std::stoll(step));
        candidates.push_back(root / iter);
    }
    for (const auto& c : candidates)
        if (fs::is_directory(c))
            return c;
    return makeError(tracker.string() + ": names step '" + step + "' but neither global_step_" + step
                     + " nor iter_" + step + " exists beside it");
}

/// The newest global_step_N or iter_N folder, for run roots without a tracker file.
fs::path newestStep(const fs::path& root)
{
    static const std::regex stepPattern(R"((global_step_|iter_)(\d+))");
    fs::path best;
    long long bestStep = -1;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
        std::smatch m;
        const std::string name = entry.path().filename().string();
        if (entry.is_directory(ec) && std::regex_match(name, m, stepPattern) && std::stoll(m[2]) > bestStep) {
            bestStep = std::stoll(m[2]);
            best = entry.path();
        }
    }
    return best;
}

/// Where verl puts config.json and the tokenizer next to a checkpoint.
std::string findHfConfig(const std::vector<fs::path>& visited)
{
    for (auto it = visited.rbegin(); it != visited.rend(); ++it)
        for (const char* sub : { "huggingface", "model/huggingface", "hf_config_and_tokenizer", "hf_config", "" }) {
            const fs::path dir = *sub ? *it / sub : *it;
            if (fs::exists(dir / "config.json"))
                return fs::absolute(dir).lexically_normal().string();
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
        return makeError(path.string() + ": no such file or folder");
    if (fs::is_regular_file(path, ec)) {
        const std::string ext = path.extension().string();
        if (ext == ".safetensors")
            return scanSafetensorsFolder(path.string());
        if (path.filename() == ".metadata")
            return dispatch(path.parent_path(), options, progress, visited, hops + 1);
        return scanTorchSaveFile(path.string());
    }
    if (!fs::is_directory(path, ec))
        return makeError(path.string() + ": neither a file nor a folder");
    visited.push_back(path);

    static const std::regex fsdpFile(R"(model_world_size_\d+_rank_\d+\.pt)");
    static const std::regex mpRank(R"(mp_rank_\d\d(_\d\d\d)?(_\d\d\d)?)");
    static const std::regex safetensorsFile(R"(.*\.safetensors)");
    const int threads = options.threads;

    if (hasFileMatching(path, fsdpFile))
        return scanVerlFsdp(path.string(), threads, progress);
    if (fs::exists(path / ".metadata")) {
        if (fs::exists(path / "metadata.json"))
            return scanMegatronDist(path.string(), threads, progress);
        return scanDcp(path.string(), threads, progress);
    }
    if (hasSubdirMatching(path, mpRank))
        return scanMegatronPerRank(path.string(), threads, progress);
    for (const char* sub : { "model/dist_ckpt", "dist_ckpt", "model" })
        if (fs::is_directory(path / sub)
            && (fs::exists(path / sub / ".metadata") || hasSubdirMatching(path / sub, mpRank)))
            return dispatch(path / sub, options, progress, visited, hops + 1);
    if (fs::exists(path / "latest_checkpointed_iteration.txt")) {
        auto step = followTracker(path);
        TESSERA_TRY(step);
        return dispatch(*step, options, progress, visited, hops + 1);
    }
    for (const char* role : { "actor", "critic" })
        if (fs::is_directory(path / role))
            return dispatch(path / role, options, progress, visited, hops + 1);
    if (hasFileMatching(path, safetensorsFile))
        return scanSafetensorsFolder(path.string());
    if (auto newest = newestStep(path); !newest.empty())
        return dispatch(newest, options, progress, visited, hops + 1);
    return makeError(path.string()
                     + ": no checkpoint found. Tessera looks for model_world_size_W_rank_R.pt files (verl FSDP), a "
                       "DCP folder (.metadata + *.distcp), Megatron mp_rank_* folders or dist_ckpt/, *.safetensors, "
                       "or a run folder with latest_checkpointed_iteration.txt");
}

} // namespace

Result<CheckpointInfo> scanCheckpoint(const std::string& path, const ScanOptions& options, Progress& progress)
{
    std::vector<fs::path> visited;
    auto info = dispatch(fs::path(path), options, progress, visited, 0);
    TESSERA_TRY(info);
    if (!options.hfModelPath.empty()) {
        if (!fs::exists(fs::path(options.hfModelPath) / "config.json"))
            info->problems.push_back({ options.hfModelPath, "", "no config.json in the --hf_model_path folder" });
        info->hfConfigDir = fs::absolute(options.hfModelPath).lexically_normal().string();
    } else if (info->hfConfigDir.empty()) {
        info->hfConfigDir = findHfConfig(visited);
    }
    return info;
}

} // namespace tessera
