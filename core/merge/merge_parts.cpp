// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/merge_parts.h"

#include "io/crc32.h"
#include "io/durable_file.h"
#include "io/fnv_hash.h"
#include "io/path_kinds.h"
#include "merge/output_identity.h"
#include "parallel.h"
#include "publish/part_set.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// Changed whenever what the id covers changes, so no set of an older version is taken for a new one.
constexpr const char* kIdFormat = "tessera-merge-part-2";

std::string outputPath(const MergeOutput& o, const std::string& name)
{
    return o.subfolder.empty() ? name : o.subfolder + "/" + name;
}

/// The set's id: everything that decides the bytes of the outputs (merge/output_identity.h) and who writes which.
std::string partsSetId(const std::vector<MergeOutput>& outputs, const PartsPlan& plan)
{
    FnvHash fnv;
    fnv.add(std::string(kIdFormat)).add(std::uint64_t(plan.parts));
    for (const auto& o : outputs) {
        fnv.add(o.subfolder);
        addOutputIdentity(fnv, *o.plan, *o.info);
    }
    for (const auto& s : plan.shares)
        for (const auto& r : s.ranges)
            fnv.add(r.path).add(r.begin).add(r.end);
    return fnv.hex();
}

/// The shares as plan.json lists them, for --status and for a person reading the folder.
std::string sharesJson(const PartsPlan& plan)
{
    auto shares = nlohmann::json::array();
    for (unsigned k = 0; k < plan.parts; ++k) {
        auto ranges = nlohmann::json::array();
        for (const auto& r : plan.shares[k].ranges)
            ranges.push_back({ { "path", r.path }, { "begin", r.begin }, { "end", r.end } });
        shares.push_back({ { "part", k }, { "bytes", plan.shares[k].bytes }, { "ranges", ranges } });
    }
    return shares.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// A block of tensor bytes a part wrote, with its CRC-32 (computed as it was written).
struct WrittenBlock {
    std::size_t output = 0, file = 0;
    std::uint64_t offset = 0, length = 0;
    std::uint32_t crc = 0;
};

/// The CRC-32 of [begin, end) of one file from the blocks written there; nullopt unless they tile it exactly.
std::optional<std::uint32_t> crcFromBlocks(const std::vector<WrittenBlock>& blocks, const PartRange& range)
{
    std::vector<const WrittenBlock*> inside;
    for (const auto& b : blocks)
        if (b.output == range.output && b.file == range.file && b.offset >= range.begin && b.offset < range.end)
            inside.push_back(&b);
    std::sort(inside.begin(), inside.end(), [](const WrittenBlock* a, const WrittenBlock* b) { return a->offset < b->offset; });
    std::uint32_t crc = 0;
    std::uint64_t at = range.begin;
    for (const auto* b : inside) {
        if (b->offset != at)
            return std::nullopt;
        crc = crc32Combine(crc, b->crc, b->length);
        at += b->length;
    }
    if (at != range.end)
        return std::nullopt;
    return crc;
}

/// A merge part's job: its outputs, its share of them and how they are written.
struct MergePartJob {
    const std::vector<MergeOutput>& outputs;
    const PartsPlan& plan;
    unsigned part;
    const MergeRunOptions& options;
    const PartWriting& writing;
    std::vector<std::string> warnings;

    Result<MergeOutcome> write(const MergeOutput& o, const std::string& dir, const MergeRunOptions& run) const
    {
        return writing.write ? writing.write(o, dir, run) : writeMergedFiles(*o.info, *o.plan, dir, run);
    }

    std::vector<RecordedRange> expectedRanges(unsigned k) const
    {
        std::vector<RecordedRange> ranges;
        for (const auto& r : plan.shares[k].ranges)
            ranges.push_back({ r.path, r.begin, r.end, 0 });
        return ranges;
    }

    /// Writes this part's tensors into `out` and records their ranges with the CRC-32 of what was written.
    Result<PartRecord> writeShare(const fs::path& out) const
    {
        for (const auto& o : outputs)
            if (!o.subfolder.empty() && ::mkdir((out / o.subfolder).c_str(), 0777) != 0 && errno != EEXIST)
                return makeError("cannot create " + (out / o.subfolder).string() + ": " + std::strerror(errno));
        const PartShare& share = plan.shares[part];
        std::mutex blocksMutex;
        std::vector<WrittenBlock> blocks;
        for (std::size_t o = 0; o < outputs.size(); ++o) {
            std::vector<bool> selected(outputs[o].plan->tensors.size(), false);
            bool any = false;
            for (const auto& r : share.ranges)
                if (r.output == o)
                    for (auto t : r.tensors)
                        selected[t] = any = true;
            if (!any)
                continue;
            MergeRunOptions run = options;
            run.onlyTensors = &selected;
            run.writeFinish = false;
            run.onTensorBytes = [&, o](std::size_t file, std::uint64_t offset, const std::uint8_t* data,
                                       std::uint64_t length) {
                const std::uint32_t crc = crc32Update(0, data, static_cast<std::size_t>(length));
                std::lock_guard<std::mutex> lock(blocksMutex);
                blocks.push_back({ o, file, offset, length, crc });
            };
            const fs::path dir = outputs[o].subfolder.empty() ? out : out / outputs[o].subfolder;
            auto written = write(outputs[o], dir.string(), run);
            TESSERA_TRY(written);
        }
        PartRecord record;
        record.bytes = share.bytes;
        for (const auto& r : share.ranges) {
            // Combined from the blocks as they were written; read back only if they do not cover the range.
            auto crc = crcFromBlocks(blocks, r);
            if (!crc) {
                auto read = crcOfFileRange((out / r.path).string(), r.begin, r.end, [&] { return isCanceled(options); });
                TESSERA_TRY(read);
                crc = *read;
            }
            record.ranges.push_back({ r.path, r.begin, r.end, *crc });
        }
        return record;
    }

    /// What only the complete set has: the headers, the index, the config and tokenizer files (for GGUF, the
    /// header and the generated tensors). Returns every file to publish.
    Result<std::vector<std::string>> finish(const fs::path& out)
    {
        for (const auto& o : outputs)
            for (const auto& f : o.plan->files) {
                struct stat st {};
                const fs::path p = out / outputPath(o, f.name);
                if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || std::uint64_t(st.st_size) != f.size)
                    return makeError(p.string() + ": missing or not " + std::to_string(f.size) + " bytes long, though "
                                     "every part recorded its bytes");
            }
        std::vector<std::string> files;
        for (const auto& o : outputs) {
            std::vector<bool> none(o.plan->tensors.size(), false);
            MergeRunOptions run = options;
            run.onlyTensors = &none;
            run.writeFinish = true;
            run.progress = nullptr;
            const fs::path dir = o.subfolder.empty() ? out : out / o.subfolder;
            auto finished = write(o, dir.string(), run);
            TESSERA_TRY(finished);
            for (const auto& f : finished->files)
                files.push_back(outputPath(o, f));
            warnings.insert(warnings.end(), finished->warnings.begin(), finished->warnings.end());
            if (!o.subfolder.empty())
                TESSERA_TRY(syncFolder(dir.string()));
        }
        return files;
    }

    std::vector<std::string> keystones() const
    {
        if (!writing.keystones.empty())
            return writing.keystones;
        const MergeOutput* top = nullptr;
        for (const auto& o : outputs)
            if (o.subfolder.empty())
                top = &o;
        std::vector<std::string> names;
        if (top && !top->plan->indexJson.empty())
            names.push_back("model.safetensors.index.json");
        else if (top && !top->plan->files.empty())
            names.push_back(top->plan->files.front().name);
        names.push_back("config.json");
        return names;
    }
};

} // namespace

Result<PartsPlan> planParts(const std::vector<MergeOutput>& outputs, unsigned parts)
{
    if (parts == 0)
        return makeError("the number of parts must be at least 1");
    PartsPlan plan;
    plan.parts = parts;
    plan.shares.resize(parts);

    // Every tensor of every file as one stream of bytes, in publish order.
    struct Unit {
        std::size_t output, file, tensor;
        std::uint64_t start, bytes;
    };
    std::vector<Unit> units;
    std::vector<std::uint64_t> fileEnds; ///< stream offsets where a file ends
    std::uint64_t at = 0;
    for (std::size_t o = 0; o < outputs.size(); ++o) {
        const MergePlan& p = *outputs[o].plan;
        for (std::size_t f = 0; f < p.files.size(); ++f) {
            std::vector<std::size_t> order = p.files[f].tensors;
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
                return p.tensors[a].fileOffset < p.tensors[b].fileOffset;
            });
            for (std::size_t t : order) {
                units.push_back({ o, f, t, at, p.tensors[t].bytes });
                at += p.tensors[t].bytes;
                plan.largestTensorBytes = std::max(plan.largestTensorBytes, p.tensors[t].bytes);
            }
            fileEnds.push_back(at);
        }
    }
    plan.totalBytes = at;
    // A part with nothing to write is no use, and each costs a record and a share in plan.json: N is bounded by
    // the work there is.
    if (parts > std::max<std::size_t>(units.size(), 1))
        return makeError("the output has " + std::to_string(units.size()) + " tensor" + (units.size() == 1 ? "" : "s")
                         + ", so it cannot be cut into " + std::to_string(parts) + " parts; use at most "
                         + std::to_string(std::max<std::size_t>(units.size(), 1)));

    // The cuts between parts: the ideal k·T/N moved to a file boundary within an eighth of a share, else to the
    // nearest tensor boundary; never before the previous cut.
    std::vector<std::uint64_t> tensorEnds;
    for (const auto& u : units)
        tensorEnds.push_back(u.start + u.bytes);
    const std::uint64_t total = plan.totalBytes;
    const std::uint64_t share = total / parts;
    const std::uint64_t slack = share / 8;
    auto nearest = [](const std::vector<std::uint64_t>& sorted, std::uint64_t x) -> std::optional<std::uint64_t> {
        auto it = std::lower_bound(sorted.begin(), sorted.end(), x);
        std::optional<std::uint64_t> best;
        if (it != sorted.end())
            best = *it;
        if (it != sorted.begin() && (!best || x - *(it - 1) <= *best - x))
            best = *(it - 1);
        return best;
    };
    std::vector<std::uint64_t> cuts { 0 };
    for (unsigned k = 1; k < parts; ++k) {
        const std::uint64_t ideal = share * k + (total % parts) * k / parts;
        std::uint64_t cut = 0;
        if (auto f = nearest(fileEnds, ideal); f && (*f > ideal ? *f - ideal : ideal - *f) <= slack)
            cut = *f;
        else if (auto t = nearest(tensorEnds, ideal))
            cut = *t;
        cuts.push_back(std::max(cut, cuts.back()));
    }

    // Each tensor goes to the part whose share holds its first byte (an empty tensor: the last such part).
    for (const auto& u : units) {
        const auto k = static_cast<unsigned>(std::upper_bound(cuts.begin(), cuts.end(), u.start) - cuts.begin() - 1);
        PartShare& s = plan.shares[k];
        const MergePlan& p = *outputs[u.output].plan;
        const PlannedTensor& t = p.tensors[u.tensor];
        if (s.ranges.empty() || s.ranges.back().output != u.output || s.ranges.back().file != u.file
            || s.ranges.back().end != t.fileOffset) {
            PartRange r;
            r.output = u.output;
            r.file = u.file;
            r.path = outputPath(outputs[u.output], p.files[u.file].name);
            r.begin = r.end = t.fileOffset;
            s.ranges.push_back(std::move(r));
        }
        s.ranges.back().end = t.fileOffset + t.bytes;
        s.ranges.back().tensors.push_back(u.tensor);
        s.bytes += t.bytes;
    }
    for (auto& s : plan.shares)
        for (const auto& r : s.ranges) {
            const PlannedFile& f = outputs[r.output].plan->files[r.file];
            if (r.tensors.size() == f.tensors.size())
                ++s.wholeFiles;
        }

    plan.id = partsSetId(outputs, plan);
    return plan;
}

Result<PartOutcome> runMergePart(const std::vector<MergeOutput>& outputs, const PartsPlan& plan, unsigned part,
                                 const std::string& targetDir, const MergeRunOptions& options, const PartWriting& writing)
{
    if (part >= plan.parts || plan.shares.size() != plan.parts)
        return makeError("part " + std::to_string(part) + " does not exist: parts are numbered 0 to "
                         + std::to_string(plan.parts - 1));
    const std::string target = normalTarget(targetDir).string();
    MergePartJob merge { outputs, plan, part, options, writing, {} };
    std::vector<std::uint64_t> shareBytes;
    for (const auto& s : plan.shares)
        shareBytes.push_back(s.bytes);

    PartJob job;
    job.target = target;
    job.id = plan.id;
    job.part = part;
    job.parts = plan.parts;
    job.planJson = PartSet::planJson(plan.id, plan.parts, target, plan.totalBytes, shareBytes, sharesJson(plan));
    job.threads = resolveThreads(static_cast<int>(options.threads));
    job.canceled = [&] { return isCanceled(options); };
    job.onNote = options.onNote;
    job.checkNewTarget = [&] {
        return writing.checkTarget ? writing.checkTarget(targetDir) : checkMergeTargets(outputs, targetDir);
    };
    job.expectedRanges = [&](unsigned k) { return merge.expectedRanges(k); };
    job.writeShare = [&](const std::string& out) { return merge.writeShare(out); };
    job.finish = [&](const std::string& out, const std::vector<PartRecord>&) { return merge.finish(out); };
    job.keystones = merge.keystones();

    auto ran = runPart(job);
    TESSERA_TRY(ran);
    PartOutcome outcome;
    static_cast<PartRunOutcome&>(outcome) = std::move(*ran);
    outcome.warnings = std::move(merge.warnings);
    return outcome;
}

} // namespace tessera
