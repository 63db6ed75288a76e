// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_parts.h"

#include "io/fnv_hash.h"
#include "io/path_kinds.h"

#include "merge/merge_parts.h"
#include "merge/output_staging.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

namespace fs = std::filesystem;

namespace tessera {

namespace {

bool isCanceled(const SplitRunOptions& o)
{
    return (o.cancel && o.cancel->load()) || (o.progress && o.progress->isCanceled());
}

std::vector<std::string> ownFiles(const SplitPlan& plan, const SplitPartsPlan& parts, unsigned part)
{
    std::vector<std::string> names;
    for (std::size_t fi = 0; fi < plan.files.size(); ++fi)
        if (parts.owner[fi] == part)
            names.push_back(plan.files[fi].name);
    return names;
}

} // namespace

Result<SplitPartsPlan> planSplitParts(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                                      unsigned parts)
{
    if (parts == 0)
        return makeError("the number of parts must be at least 1");
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
    FnvHash fnv;
    fnv.add(std::string("tessera-split-part-1")).add(std::uint64_t(parts)).add(std::string(splitFormatName(plan.format)))
        .add(plan.layout).add(plan.keystone).add(plan.dcpFolder).add(plan.sideFolder);
    for (std::size_t fi = 0; fi < plan.files.size(); ++fi) {
        const auto& f = plan.files[fi];
        fnv.add(f.name).add(f.bytes).add(std::uint64_t(p.owner[fi]));
        for (const auto& t : f.tensors)
            fnv.add(t.spec.name).add(t.bytes());
    }
    for (const auto& [name, content] : plan.generatedFiles)
        fnv.add(name).add(content);
    // The source files, by their path below the checkpoint, size and time: a rewritten source gets a new set.
    std::set<std::string> sources;
    for (const auto& t : model.tensors)
        if (t.source < info.tensors.size())
            for (const auto& piece : info.tensors[t.source].pieces)
                sources.insert(piece.file);
    for (const auto& file : sources) {
        fs::path rel = fs::path(file).lexically_relative(info.root);
        if (rel.empty() || rel.begin()->string() == "..")
            rel = fs::path(file).filename();
        struct stat st {};
        if (::stat(file.c_str(), &st) != 0)
            st = {};
        fnv.add(rel.string()).add(std::uint64_t(st.st_size)).add(std::uint64_t(st.st_mtim.tv_sec))
            .add(std::uint64_t(st.st_mtim.tv_nsec));
    }
    char id[17];
    std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(fnv.h));
    p.id = id;
    return p;
}

Result<SplitPartOutcome> runSplitPart(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                                      const SplitPartsPlan& parts, unsigned part, const std::string& targetDir,
                                      const SplitRunOptions& options)
{
    if (part >= parts.parts || parts.owner.size() != plan.files.size())
        return makeError("part " + std::to_string(part) + " does not exist: parts are numbered 0 to "
                         + std::to_string(parts.parts - 1));
    const auto start = std::chrono::steady_clock::now();
    SplitPartOutcome outcome;
    auto note = [&](const std::string& text) {
        outcome.notes.push_back(text);
        if (options.onNote)
            options.onNote(text);
    };
    auto canceled = [&] { return isCanceled(options); };
    TESSERA_TRY(OutputStaging::checkTarget(targetDir, {}));
    for (const auto& n : OutputStaging::removeStale(targetDir))
        note(n);
    const std::string target = normalTarget(targetDir).string(); // as merge parts name it: "out/" is "out"
    auto set = parts::openSet(targetDir, parts.id,
                              parts::planJson(parts.id, parts.parts, target, parts.totalBytes, parts.shareBytes),
                              [&] { return checkSplitTarget(plan, targetDir); }, note);
    TESSERA_TRY(set);
    outcome.setFolder = *set;
    const fs::path out = parts::outFolder(*set);

    // This part's files: checked when its record lists them, else written and recorded.
    const auto mine = ownFiles(plan, parts, part);
    auto recorded = parts::readRecordFiles(*set, parts.id, part, parts.parts);
    TESSERA_TRY(recorded);
    if (*recorded && recorded->value().size() == mine.size()) {
        bool same = true;
        for (std::size_t i = 0; same && i < mine.size(); ++i) {
            const auto& r = recorded->value()[i];
            auto crc = parts::crcOfFile((out / r.path).string(), r.size, canceled);
            struct stat st {};
            same = r.path == mine[i] && crc && *crc == r.crc && ::stat((out / r.path).c_str(), &st) == 0
                && std::uint64_t(st.st_size) == r.size;
        }
        outcome.alreadyDone = same;
    }
    if (!outcome.alreadyDone) {
        parts::removeRecord(*set, part, parts.parts);
        std::vector<bool> selected(plan.files.size(), false);
        for (std::size_t fi = 0; fi < plan.files.size(); ++fi)
            selected[fi] = parts.owner[fi] == part;
        auto items = writeSplitFiles(info, model, plan, out.string(), options, &selected);
        TESSERA_TRY(items);
        std::vector<parts::RecordedFile> files;
        nlohmann::json extra { { "items", nlohmann::json::object() } };
        for (std::size_t fi = 0; fi < plan.files.size(); ++fi) {
            if (!selected[fi])
                continue;
            const fs::path path = out / plan.files[fi].name;
            std::error_code ec;
            const auto size = fs::file_size(path, ec);
            if (ec)
                return makeError(path.string() + ": cannot be read back: " + ec.message());
            auto crc = parts::crcOfFile(path.string(), size, canceled);
            TESSERA_TRY(crc);
            files.push_back({ plan.files[fi].name, size, *crc });
            outcome.bytesWritten += size;
            ++outcome.filesWritten;
            if (!(*items)[fi].empty())
                extra["items"][plan.files[fi].name] = (*items)[fi];
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        TESSERA_TRY(parts::writeRecord(*set, parts.id, part, parts.parts, files, extra.dump(), seconds));
    }
    outcome.missing = parts::missingParts(*set, parts.parts);
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!outcome.missing.empty())
        return outcome;
    auto claim = parts::claimPublish(*set, outcome.notes);
    TESSERA_TRY(claim);
    if (!*claim) {
        outcome.finishingElsewhere = true;
        return outcome;
    }

    // The last part: every record must list the files the plan gives its part, as they are on disk; the DCP items
    // they wrote make the .metadata.
    SplitItems items(plan.files.size());
    std::string problems;
    for (unsigned k = 0; k < parts.parts; ++k) {
        auto files = parts::readRecordFiles(*set, parts.id, k, parts.parts);
        TESSERA_TRY(files);
        const auto expected = ownFiles(plan, parts, k);
        bool ok = *files && files->value().size() == expected.size();
        for (std::size_t i = 0; ok && i < expected.size(); ++i) {
            struct stat st {};
            ok = files->value()[i].path == expected[i] && ::stat((out / expected[i]).c_str(), &st) == 0
                && std::uint64_t(st.st_size) == files->value()[i].size;
        }
        if (!ok) {
            problems += "\n  part " + std::to_string(k) + ": its record does not list the files of the plan as they are";
            continue;
        }
        auto extra = parts::readRecordExtra(*set, parts.id, k, parts.parts, files->value());
        TESSERA_TRY(extra);
        auto j = nlohmann::json::parse(extra->value_or("{}"), nullptr, false);
        for (std::size_t fi = 0; fi < plan.files.size(); ++fi) {
            if (parts.owner[fi] != k || plan.files[fi].kind != SplitFile::Kind::DcpItems)
                continue;
            try {
                items[fi] = j.at("items").at(plan.files[fi].name).get<std::vector<std::pair<std::uint64_t, std::uint64_t>>>();
            } catch (const nlohmann::json::exception&) {
                problems += "\n  part " + std::to_string(k) + ": no DCP items recorded for " + plan.files[fi].name;
            }
            if (items[fi].size() != plan.files[fi].tensors.size())
                problems += "\n  part " + std::to_string(k) + ": the DCP items of " + plan.files[fi].name
                    + " do not match the plan";
        }
    }
    if (!problems.empty())
        return makeError("the parts' records in " + *set + " do not match the plan:" + problems);
    auto files = finishSplitFolder(model, plan, out.string(), items);
    TESSERA_TRY(files);
    TESSERA_TRY(parts::publishSet(targetDir, *set, { plan.keystone }));
    outcome.published = true;
    outcome.files = std::move(*files);
    outcome.outputDir = target;
    outcome.setFolder.clear();
    TESSERA_TRY(recordRunIteration(plan, target, options, outcome.notes));
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return outcome;
}

} // namespace tessera
