// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/output_identity.h"

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <set>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// Every file `plan` reads from `info`, absolute.
std::set<std::string> sourceFiles(const MergePlan& plan, const CheckpointInfo& info)
{
    std::set<std::string> files;
    auto addPieces = [&](const TensorInfo& t) {
        for (const auto& p : t.pieces) {
            files.insert(p.file);
            if (!p.scaleFile.empty())
                files.insert(p.scaleFile);
        }
    };
    auto addSource = [&](std::size_t index) {
        if (index < info.tensors.size())
            addPieces(info.tensors[index]);
    };
    for (const auto& planned : plan.tensors) {
        addSource(planned.source);
        if (planned.delta) {
            addPieces(planned.delta->a);
            addPieces(planned.delta->b);
        }
    }
    for (const auto& tie : plan.tieChecks) {
        addSource(tie.dropped);
        addSource(tie.kept);
    }
    return files;
}

/// A file's name as every node sees it: its path below the checkpoint, else (a base model's, a config folder
/// elsewhere) its file name.
std::string nameBelow(const std::string& file, const std::string& root)
{
    fs::path rel = fs::path(file).lexically_relative(root);
    if (rel.empty() || rel.begin()->string() == "..")
        rel = fs::path(file).filename();
    return rel.string();
}

std::uint64_t bitsOf(double value)
{
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

void addTensor(FnvHash& fnv, const PlannedTensor& t)
{
    fnv.add(t.name).add(std::uint64_t(t.source)).add(std::uint64_t(t.sourceDtype)).add(std::uint64_t(t.dtype))
        .add(std::uint64_t(t.mode)).add(t.bytes).add(std::uint64_t(t.file)).add(t.fileOffset);
    if (!t.delta) {
        fnv.add(std::uint64_t(0));
        return;
    }
    // The update W + scale·B·A: its factors (their files are among the sources) and the scale (lora_alpha, rslora).
    const PlannedDelta& d = *t.delta;
    fnv.add(std::uint64_t(1)).add(d.a.name).add(d.b.name).add(bitsOf(d.scale)).add(std::uint64_t(d.transposed));
}

} // namespace

void addFileIdentity(FnvHash& fnv, const std::string& name, const std::string& path)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        st = {};
    fnv.add(name).add(std::uint64_t(st.st_size)).add(std::uint64_t(st.st_mtim.tv_sec))
        .add(std::uint64_t(st.st_mtim.tv_nsec));
}

void addConfigFolderIdentity(FnvHash& fnv, const ConfigFolder& config)
{
    fnv.add(std::uint64_t(config.files.size()));
    for (const auto& name : config.files)
        addFileIdentity(fnv, name, config.pathOf(name));
}

void addOutputIdentity(FnvHash& fnv, const MergePlan& plan, const CheckpointInfo& info)
{
    fnv.add(plan.layout).add(plan.indexJson);
    // What config.json becomes.
    fnv.add(std::uint64_t(plan.configDtype ? int(*plan.configDtype) + 1 : 0)).add(std::uint64_t(plan.configTied))
        .add(std::uint64_t(plan.configDequantized));
    addConfigFolderIdentity(fnv, plan.config);
    fnv.add(std::uint64_t(plan.generatedFiles.size()));
    for (const auto& [name, content] : plan.generatedFiles)
        fnv.add(name).add(content);
    fnv.add(std::uint64_t(plan.files.size()));
    for (const auto& f : plan.files)
        fnv.add(f.name).add(f.size).add(f.header);
    fnv.add(std::uint64_t(plan.tensors.size()));
    for (const auto& t : plan.tensors)
        addTensor(fnv, t);
    fnv.add(std::uint64_t(plan.tieChecks.size()));
    for (const auto& tie : plan.tieChecks)
        fnv.add(std::uint64_t(tie.dropped)).add(std::uint64_t(tie.kept)).add(std::uint64_t(tie.forced));
    const std::set<std::string> files = sourceFiles(plan, info);
    fnv.add(std::uint64_t(files.size()));
    for (const auto& file : files)
        addFileIdentity(fnv, nameBelow(file, info.root), file);
}

} // namespace tessera
