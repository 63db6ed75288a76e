// SPDX-License-Identifier: GPL-3.0-or-later
// The checks of a merge's target folder, before anything is written (declared in merge/merge_engine.h): the
// target apart from every folder the merge reads, no files there it would not replace, enough free disk.
#include "merge/merge_engine.h"

#include "io/path_kinds.h"
#include "io/printable.h"
#include "merge/hf_output.h"
#include "publish/target_checks.h"

#include <algorithm>
#include <filesystem>
#include <set>

namespace fs = std::filesystem;

namespace tessera {

Status checkMergeTarget(const MergePlan& plan, const std::string& targetDir)
{
    TESSERA_TRY(checkTarget(targetDir, plan.outputFileNames()));
    const auto conflicts = conflictingWeightFiles(targetDir, plan.outputFileNames());
    if (!conflicts.empty()) {
        std::string names;
        for (const auto& c : conflicts)
            names += (names.empty() ? "" : ", ") + c;
        return makeError(targetDir + " already holds weight files this merge would not replace (" + names
                         + "); a loader could mix them with the merged model. Remove them or choose another --target_dir");
    }
    if (const auto others = conflictingSideFiles(targetDir, plan.outputFileNames()); !others.empty()) {
        std::string names;
        for (const auto& c : others)
            names += (names.empty() ? "" : ", ") + c;
        return makeError(targetDir + " already holds config or tokenizer files this merge would not replace (" + names
                         + "); the folder would pair the merged weights with another model's. Remove them or choose "
                           "another --target_dir");
    }
    // The temporary folder is inside the target when it exists, else beside it: the same disk either way.
    if (auto free = freeDiskBytes(targetDir); free && *free < plan.diskBytes)
        return makeError("the merge writes " + std::to_string(plan.diskBytes) + " bytes but only "
                         + std::to_string(*free) + " are free on the disk holding "
                         + absoluteNormal(targetDir).string());
    return Status::success();
}

namespace {

/// Refuses a sub-folder of the target that holds anything the new output would not replace.
Status checkSubfolder(const std::string& targetDir, const MergeOutput& output)
{
    const fs::path dir = fs::path(targetDir) / output.subfolder;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(dir, ec)))
        return Status::success();
    if (!fs::is_directory(fs::symlink_status(dir, ec)))
        return makeError(dir.string() + " exists and is not a folder; move it away or choose another target folder");
    const auto names = output.plan->outputFileNames();
    for (const auto& entry : folderEntries(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (std::find(names.begin(), names.end(), name) == names.end())
            return makeError(dir.string() + " holds " + printableText(name)
                             + ", which this merge would not write; the folder is "
                             "replaced as a whole, so move it away or choose another target folder");
    }
    return Status::success();
}

} // namespace

std::vector<std::string> mergeSourceFolders(const std::vector<MergeOutput>& outputs)
{
    std::set<std::string> folders;
    for (const auto& o : outputs) {
        folders.insert(o.info->root);
        folders.insert(o.plan->config.path);
        auto addPieces = [&](const TensorInfo& t) {
            for (const auto& p : t.pieces)
                folders.insert(fs::path(p.file).parent_path().string());
        };
        for (const auto& planned : o.plan->tensors) {
            if (planned.source < o.info->tensors.size())
                addPieces(o.info->tensors[planned.source]);
            if (planned.delta) {
                addPieces(planned.delta->a);
                addPieces(planned.delta->b);
            }
        }
    }
    folders.erase("");
    return { folders.begin(), folders.end() };
}

Status checkMergeTargets(const std::vector<MergeOutput>& outputs, const std::string& targetDir)
{
    TESSERA_TRY(checkTargetApart(targetDir, mergeSourceFolders(outputs)));
    std::uint64_t diskBytes = 0;
    for (const auto& o : outputs) {
        TESSERA_TRY(o.subfolder.empty() ? checkMergeTarget(*o.plan, targetDir) : checkSubfolder(targetDir, o));
        diskBytes += o.plan->diskBytes;
    }
    if (auto free = freeDiskBytes(targetDir); free && *free < diskBytes)
        return makeError("the merge writes " + std::to_string(diskBytes) + " bytes but only " + std::to_string(*free)
                         + " are free on the disk holding " + absoluteNormal(targetDir).string());
    return Status::success();
}

} // namespace tessera
