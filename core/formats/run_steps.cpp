// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/run_steps.h"

#include "io/path_kinds.h"
#include "io/regex.h"

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// The saved steps directly in `dir`.
std::vector<RunStep> stepsIn(const fs::path& dir, const std::string& role)
{
    std::vector<RunStep> steps;
    std::error_code ec;
    for (const auto& entry : folderEntries(dir, ec)) {
        const std::string name = entry.path().filename().string();
        const auto step = stepOfFolderName(name);
        if (!step || !entry.is_directory(ec))
            continue;
        RunStep s;
        s.step = *step;
        s.folder = entry.path().string();
        // A verl step holds one folder per role; Megatron's and torchtitan's step folders are the checkpoint.
        s.path = name.rfind("global_step_", 0) == 0 ? (entry.path() / role).string() : s.folder;
        steps.push_back(std::move(s));
    }
    return steps;
}

} // namespace

std::optional<long long> stepOfFolderName(const std::string& name)
{
    static const Regex pattern = Regex::fixed(R"((?:global_step_|iter_|step-)(\d{1,18}))");
    std::vector<std::string> m;
    if (!pattern.fullMatch(name, m))
        return std::nullopt;
    return std::stoll(m[0]);
}

Result<std::vector<RunStep>> findRunSteps(const std::string& root, const std::string& role)
{
    const fs::path dir(root);
    if (!isFolder(dir))
        return makeError(root + ": not a folder");
    std::vector<RunStep> steps = stepsIn(dir, role);
    if (steps.empty() && isFolder(dir / "checkpoint"))
        steps = stepsIn(dir / "checkpoint", role); // torchtitan's default --checkpoint.folder
    if (steps.empty()) {
        // A single step's folder (or its role folder) is a run of one step.
        fs::path folder = absoluteNormal(dir);
        if (folder.filename() == role && stepOfFolderName(folder.parent_path().filename().string()))
            folder = folder.parent_path();
        if (const auto step = stepOfFolderName(folder.filename().string())) {
            for (auto& s : stepsIn(folder.parent_path(), role))
                if (s.step == *step && s.folder == folder.string())
                    steps.push_back(std::move(s));
        }
    }
    if (steps.empty())
        return makeError(root + ": no saved steps found; a run root holds global_step_N (verl), iter_N (Megatron) "
                         "or step-N (torchtitan) folders");
    std::sort(steps.begin(), steps.end(), [](const RunStep& x, const RunStep& y) {
        return x.step != y.step ? x.step < y.step : x.folder < y.folder;
    });
    for (std::size_t i = 1; i < steps.size(); ++i)
        if (steps[i].step == steps[i - 1].step)
            return makeError(root + ": step " + std::to_string(steps[i].step) + " is saved twice ("
                             + fs::path(steps[i - 1].folder).filename().string() + " and "
                             + fs::path(steps[i].folder).filename().string() + "); keep one");
    return steps;
}

} // namespace tessera
