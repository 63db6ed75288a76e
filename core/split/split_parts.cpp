// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_parts.h"

#include "io/fnv_hash.h"
#include "io/path_kinds.h"
#include "merge/output_identity.h"
#include "parallel.h"
#include "publish/part_set.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

namespace {

bool isCanceled(const SplitRunOptions& o)
{
    return (o.cancel && o.cancel->load()) || (o.progress && o.progress->isCanceled());
}

void addShape(FnvHash& fnv, const Shape& shape)
{
    fnv.add(std::uint64_t(shape.size()));
    for (auto d : shape)
        fnv.add(std::uint64_t(d));
}

/// One output tensor as its file holds it: key, dtype, local and global shapes, storage, DTensor spec, and the
/// boxes of the model it is cut from.
void addSplitTensor(FnvHash& fnv, const SplitTensor& t)
{
    const TorchSaveTensor& spec = t.spec;
    fnv.add(spec.name).add(std::uint64_t(spec.dtype)).add(spec.storageElements).add(std::uint64_t(spec.dtensor));
    addShape(fnv, spec.shape);
    addShape(fnv, t.globalShape);
    addShape(fnv, t.chunkOffsets);
    for (const auto& placement : spec.placements)
        fnv.add(placement.text());
    addShape(fnv, spec.coordinate);
    fnv.add(std::uint64_t(t.fragments.size()));
    for (const auto& f : t.fragments) {
        fnv.add(std::uint64_t(f.source)).add(std::uint64_t(f.localElement.value_or(~0ull)));
        for (const Shape* s : { &f.sourceOffsets, &f.shape, &f.localOffsets, &f.localStrides, &f.sourceBoxShape })
            addShape(fnv, *s);
    }
}

/// The set's id: the model written (merge/output_identity.h: its sources, LoRA updates, side files and config
/// edits, the same identity a merge's parts have), the layout it is written in, every file and the part that
/// writes it.
std::string splitPartsId(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                         const SplitPartsPlan& parts)
{
    FnvHash fnv;
    fnv.add(std::string("tessera-split-part-2")).add(std::uint64_t(parts.parts));
    addOutputIdentity(fnv, model, info);
    fnv.add(std::string(splitFormatName(plan.format))).add(plan.layout).add(plan.keystone).add(plan.dcpFolder)
        .add(plan.sideFolder).add(std::uint64_t(plan.runIteration.value_or(-1)));
    addShape(fnv, plan.mesh);
    for (const auto& name : plan.meshDimNames)
        fnv.add(name);
    for (auto rank : plan.meshRanks)
        fnv.add(std::uint64_t(rank));
    addConfigFolderIdentity(fnv, plan.config);
    for (std::size_t fi = 0; fi < plan.files.size(); ++fi) {
        const auto& f = plan.files[fi];
        fnv.add(f.name).add(f.bytes).add(std::uint64_t(parts.owner[fi])).add(std::uint64_t(f.kind)).add(f.archiveName)
            .add(std::uint64_t(f.rank)).add(f.rootItems);
        for (auto n : f.listChunks)
            fnv.add(std::uint64_t(n));
        for (const auto& key : f.chunkKeys)
            fnv.add(key);
        fnv.add(std::uint64_t(f.tensors.size()));
        for (const auto& t : f.tensors)
            addSplitTensor(fnv, t);
    }
    for (const auto& [name, content] : plan.generatedFiles)
        fnv.add(name).add(content);
    for (const auto& [name, pickle] : plan.generatedPickles)
        fnv.add(name).add(pickle);
    return fnv.hex();
}

} // namespace

Result<SplitPartsPlan> planSplitParts(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                                      unsigned parts)
{
    if (parts == 0)
        return makeError("the number of parts must be at least 1");
    // Parts write whole files: more parts than files would leave some with nothing to do.
    if (parts > std::max<std::size_t>(plan.files.size(), 1))
        return makeError("the split writes " + std::to_string(plan.files.size()) + " file"
                         + (plan.files.size() == 1 ? "" : "s") + ", so it cannot be cut into " + std::to_string(parts)
                         + " parts; use at most " + std::to_string(std::max<std::size_t>(plan.files.size(), 1)));
    SplitPartsPlan p;
    p.parts = parts;
    std::vector<std::uint64_t> ends;
    for (const auto& f : plan.files) {
        p.totalBytes += f.bytes;
        ends.push_back(p.totalBytes);
    }
    // Cut k falls on the file end nearest to k·T/N, never before cut k-1.
    std::vector<std::uint64_t> cuts { 0 };
    const std::uint64_t total = p.totalBytes;
    for (unsigned k = 1; k < parts; ++k) {
        const std::uint64_t ideal = total / parts * k + (total % parts) * k / parts;
        std::uint64_t cut = 0;
        auto it = std::lower_bound(ends.begin(), ends.end(), ideal);
        if (it != ends.end())
            cut = *it;
        if (it != ends.begin() && (it == ends.end() || ideal - *(it - 1) <= *it - ideal))
            cut = *(it - 1);
        cuts.push_back(std::max(cut, cuts.back()));
    }
    p.shareBytes.assign(parts, 0);
    std::uint64_t start = 0;
    for (std::size_t fi = 0; fi < plan.files.size(); ++fi) {
        const auto k = static_cast<unsigned>(std::upper_bound(cuts.begin(), cuts.end(), start) - cuts.begin() - 1);
        p.owner.push_back(k);
        p.shareBytes[k] += plan.files[fi].bytes;
        start = ends[fi];
    }
    p.id = splitPartsId(info, model, plan, p);
    return p;
}

namespace {

/// What a split part brings to the part run: its files, and at the end the DCP .metadata from every part's items.
struct SplitPartJob {
    const CheckpointInfo& info;
    const MergePlan& model;
    const SplitPlan& plan;
    const SplitPartsPlan& parts;
    unsigned part;
    const SplitRunOptions& options;
    std::size_t filesWritten = 0;

    std::vector<RecordedRange> expectedRanges(unsigned k) const
    {
        std::vector<RecordedRange> ranges;
        for (std::size_t fi = 0; fi < plan.files.size(); ++fi)
            if (parts.owner[fi] == k)
                ranges.push_back({ plan.files[fi].name, 0, plan.files[fi].bytes, 0 });
        return ranges;
    }

    Result<PartRecord> writeShare(const fs::path& out)
    {
        std::vector<bool> selected(plan.files.size(), false);
        for (std::size_t fi = 0; fi < plan.files.size(); ++fi)
            selected[fi] = parts.owner[fi] == part;
        auto items = writeSplitFiles(info, model, plan, out.string(), options, &selected);
        TESSERA_TRY(items);
        PartRecord record;
        nlohmann::json extra { { "items", nlohmann::json::object() } };
        for (std::size_t fi = 0; fi < plan.files.size(); ++fi) {
            if (!selected[fi])
                continue;
            const fs::path path = out / plan.files[fi].name;
            auto crc = crcOfFileRange(path.string(), 0, plan.files[fi].bytes, [&] { return isCanceled(options); });
            TESSERA_TRY(crc);
            record.ranges.push_back({ plan.files[fi].name, 0, plan.files[fi].bytes, *crc });
            record.bytes += plan.files[fi].bytes;
            ++filesWritten;
            if (!(*items)[fi].empty())
                extra["items"][plan.files[fi].name] = (*items)[fi];
        }
        record.extraJson = extra.dump();
        return record;
    }

    /// The DCP items each part recorded, then the .metadata, generated and config files.
    Result<std::vector<std::string>> finish(const fs::path& out, const std::vector<PartRecord>& records) const
    {
        SplitItems items(plan.files.size());
        std::string problems;
        for (const auto& record : records) {
            auto j = nlohmann::json::parse(record.extraJson, nullptr, false);
            for (std::size_t fi = 0; fi < plan.files.size(); ++fi) {
                if (parts.owner[fi] != record.part || plan.files[fi].kind != SplitFile::Kind::DcpItems)
                    continue;
                try {
                    items[fi] = j.at("items").at(plan.files[fi].name)
                                    .get<std::vector<std::pair<std::uint64_t, std::uint64_t>>>();
                } catch (const nlohmann::json::exception&) {
                    problems += "\n  part " + std::to_string(record.part) + ": no DCP items recorded for "
                        + plan.files[fi].name;
                }
                if (items[fi].size() != plan.files[fi].tensors.size())
                    problems += "\n  part " + std::to_string(record.part) + ": the DCP items of "
                        + plan.files[fi].name + " do not match the plan";
            }
        }
        if (!problems.empty())
            return makeError("the parts' records in " + out.parent_path().string() + " do not match the plan:"
                             + problems);
        return finishSplitFolder(model, plan, out.string(), items);
    }
};

} // namespace

Result<SplitPartOutcome> runSplitPart(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                                      const SplitPartsPlan& parts, unsigned part, const std::string& targetDir,
                                      const SplitRunOptions& options)
{
    if (part >= parts.parts || parts.owner.size() != plan.files.size())
        return makeError("part " + std::to_string(part) + " does not exist: parts are numbered 0 to "
                         + std::to_string(parts.parts - 1));
    const std::string target = normalTarget(targetDir).string(); // as merge parts name it: "out/" is "out"
    SplitPartJob split { info, model, plan, parts, part, options };
    PartJob job;
    job.target = target;
    job.id = parts.id;
    job.part = part;
    job.parts = parts.parts;
    job.planJson = PartSet::planJson(parts.id, parts.parts, target, parts.totalBytes, parts.shareBytes);
    job.what = "split";
    job.threads = resolveThreads(static_cast<int>(options.threads));
    job.canceled = [&] { return isCanceled(options); };
    job.onNote = options.onNote;
    job.checkNewTarget = [&] { return checkSplitTarget(info, model, plan, targetDir); };
    job.expectedRanges = [&](unsigned k) { return split.expectedRanges(k); };
    job.writeShare = [&](const std::string& out) { return split.writeShare(out); };
    job.finish = [&](const std::string& out, const std::vector<PartRecord>& records) {
        return split.finish(out, records);
    };
    job.keystones = { plan.keystone };

    auto ran = runPart(job);
    TESSERA_TRY(ran);
    SplitPartOutcome outcome;
    static_cast<PartRunOutcome&>(outcome) = std::move(*ran);
    outcome.filesWritten = split.filesWritten;
    if (outcome.published) {
        outcome.outputDir = target;
        TESSERA_TRY(recordRunIteration(plan, target, options, outcome.notes));
    }
    return outcome;
}

} // namespace tessera
