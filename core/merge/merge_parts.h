// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// One merge split across N processes (`tessera merge --part K/N`), on one machine or many sharing a file system,
// without a coordinator: every process computes the same plan and the same assignment, writes only its share
// into a folder they all find by name, and records that it is done; the process that completes the set verifies
// the records, writes the headers, index and config files and publishes the folder as a single merge would.
//
// The shared folder, `.tessera-parts-<id>` inside the target (or `.<name>.tessera-parts-<id>` beside it when the
// target does not exist yet), where <id> is a hash of the plan, the assignment and the source files:
//   plan.json            the assignment, for `tessera merge --status` (written by every part, same bytes)
//   out/                 the model being written (published as a whole: see OutputStaging::adopt())
//   part-K-of-N.json     part K's record: the byte ranges it wrote and their CRC-32, written when they are on disk
//   finishing            the claim of the process publishing the set (link()ed into place, so only one wins;
//                        held with flock, so a dead finisher's claim is taken over by the next part that finishes)
// A GGUF export is split the same way (merge/gguf_parts.h): its one file is cut into byte ranges, and the
// finishing part writes its header and generated tensors.
// Dead single-process runs' temporary folders are removed as always (OutputStaging::removeStale()); their names
// never match a shared folder's, so no part's work is ever taken for a dead run's.

#include "merge/merge_engine.h"
#include "result.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// A run of consecutive tensors of one output file that one part writes: bytes [begin, end) of the file.
struct PartRange {
    std::size_t output = 0;           ///< index into the outputs the parts were planned for
    std::size_t file = 0;             ///< index into that output's MergePlan::files
    std::string path;                 ///< the file's path inside the output folder ("lora_adapter/x.safetensors")
    std::uint64_t begin = 0, end = 0;
    std::vector<std::size_t> tensors; ///< indices into that output's MergePlan::tensors

    bool operator==(const PartRange& o) const { return path == o.path && begin == o.begin && end == o.end; }
};

/// What one part writes.
struct PartShare {
    std::vector<PartRange> ranges;
    std::uint64_t bytes = 0;
    std::size_t wholeFiles = 0;       ///< files this part writes entirely
};

/// The assignment of a merge to N parts: a deterministic function of the plans alone.
struct PartsPlan {
    unsigned parts = 1;
    std::string id;                   ///< 16 hex digits naming the set (plans, assignment, source files)
    std::uint64_t totalBytes = 0;
    std::uint64_t largestTensorBytes = 0;
    std::vector<PartShare> shares;    ///< one per part
};

/// Cuts the tensor bytes of `outputs` (every file in order, as one stream) into `parts` contiguous shares of about
/// equal bytes. Each cut falls on a file boundary when one lies within an eighth of a share of the ideal cut k·T/N,
/// else on the nearest tensor boundary (within half the largest tensor of it): with many files every part writes
/// whole files, with one big file each writes a byte range of it. Any single-file output whose plan places tensors
/// at fixed offsets after a header is cut the same way (safetensors here; a GGUF file in merge/gguf_parts.h).
Result<PartsPlan> planParts(const std::vector<MergeOutput>& outputs, unsigned parts);

/// What one part did.
struct PartOutcome {
    std::string setFolder;              ///< the shared folder (gone once published)
    std::uint64_t bytesWritten = 0;     ///< tensor bytes this part wrote (0 when its bytes were already there)
    bool alreadyDone = false;           ///< its record was there and its bytes checked out: nothing rewritten
    double seconds = 0;
    std::vector<unsigned> missing;      ///< parts not done yet when this one finished
    bool published = false;             ///< this process completed the set and published it
    bool finishingElsewhere = false;    ///< the set is complete and another live process is publishing it
    std::vector<std::string> files;     ///< with `published`: the files in publish order
    std::vector<std::string> warnings;
    std::vector<std::string> notes;
};

/// How a part writes outputs that writeMergedFiles() does not write alone (a GGUF file, whose Q8_0 and generated
/// tensors are written beside the streamed ones: see merge/gguf_parts.h). Every member is optional.
struct PartWriting {
    /// Called as writeMergedFiles() would be, with `run.onlyTensors` (this part's tensors; none when finishing) and
    /// `run.writeFinish` (what only the finishing part writes); tells `run.onTensorBytes` every block it writes.
    std::function<Result<MergeOutcome>(const MergeOutput& output, const std::string& dir, const MergeRunOptions& run)>
        write;
    /// Refuses a target the output cannot go into, before a new set is made (default: checkMergeTargets()).
    std::function<Status(const std::string& targetDir)> checkTarget;
    /// The names published last, in order (default: the index or the only model file, then config.json).
    std::vector<std::string> keystones;
};

/// Runs part `part` (0-based) of `parts` into `targetDir`: checks the target, writes the part's ranges into the
/// shared folder (or checks them, when a record says they are there), records them, and when every part's record
/// is there, claims, verifies and publishes the set. Idempotent: re-running a part (killed, failed or finished)
/// only completes the set. On any error the target is left as it was and the shared folder kept for a re-run.
Result<PartOutcome> runMergePart(const std::vector<MergeOutput>& outputs, const PartsPlan& plan, unsigned part,
                                 const std::string& targetDir, const MergeRunOptions& options,
                                 const PartWriting& writing = {});

/// A process as a part's record or the publishing claim names it. Other processes, on other hosts, wrote these
/// files, so what is read is checked: the host is kept as written (escape it before showing it), the pid only when
/// it is a whole number a pid can be.
struct PartProcess {
    std::string host;
    std::optional<long> pid; ///< nullopt when missing or not a pid (negative, fractional, past 2^31 - 1, text)
};

/// One part's record, as read back.
struct PartRecord {
    unsigned part = 0;
    std::uint64_t bytes = 0;
    double seconds = 0;
    PartProcess process;
};

/// A shared folder of a split merge into a target, as `tessera merge --status` reports it.
struct PartsSetStatus {
    std::string folder;
    std::string id;
    unsigned parts = 0;                ///< 0 when plan.json is unreadable
    std::uint64_t totalBytes = 0;
    std::vector<std::uint64_t> shareBytes;
    std::vector<PartRecord> done;
    std::vector<unsigned> missing;
    std::optional<PartProcess> finisher; ///< the claim's holder, when a claim is there
    bool finisherAlive = false;          ///< the claim is held (flock) by a live process
};

/// Every shared folder of split merges into `targetDir` (inside it and beside it).
std::vector<PartsSetStatus> partsStatus(const std::string& targetDir);

/// The same mechanics for other jobs split into parts whose parts write whole files (`tessera split --part`):
/// the shared folder, the records, the claim and the publish. `tessera merge --status` reports their sets too.
namespace parts {

/// A whole file a part wrote: its path in the output folder, its size and CRC-32.
struct RecordedFile {
    std::string path;
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
};

/// plan.json for a set of `parts` parts with these shares.
std::string planJson(const std::string& id, unsigned parts, const std::string& target, std::uint64_t totalBytes,
                     const std::vector<std::uint64_t>& shareBytes);
/// The set's folder, found or made (with out/ and plan.json); `checkNew` runs before a new set is made.
Result<std::string> openSet(const std::string& targetDir, const std::string& id, const std::string& planJson,
                            const std::function<Status()>& checkNew, const std::function<void(const std::string&)>& note);
/// Where parts write: out/ of the set.
std::string outFolder(const std::string& set);
/// Part `part`'s record: the files it wrote and its own data (a JSON object as text).
Status writeRecord(const std::string& set, const std::string& id, unsigned part, unsigned parts,
                   const std::vector<RecordedFile>& files, const std::string& extraJson, double seconds);
/// The files part `part` recorded; nullopt when it has no valid record.
Result<std::optional<std::vector<RecordedFile>>> readRecordFiles(const std::string& set, const std::string& id,
                                                                 unsigned part, unsigned parts);
/// The record's own data, when it lists exactly `expected`; nullopt otherwise.
Result<std::optional<std::string>> readRecordExtra(const std::string& set, const std::string& id, unsigned part,
                                                   unsigned parts, const std::vector<RecordedFile>& expected);
/// Removes a record before its part's files are written again.
void removeRecord(const std::string& set, unsigned part, unsigned parts);
/// Parts without a record.
std::vector<unsigned> missingParts(const std::string& set, unsigned parts);

/// The right to publish a complete set, held until destroyed; empty when another live process holds it.
class PublishClaim {
public:
    PublishClaim();
    PublishClaim(PublishClaim&&) noexcept;
    ~PublishClaim();
    explicit operator bool() const { return m_held != nullptr; }

private:
    struct Held;
    std::unique_ptr<Held> m_held;
    friend Result<PublishClaim> claimPublish(const std::string& set, std::vector<std::string>& notes);
};
Result<PublishClaim> claimPublish(const std::string& set, std::vector<std::string>& notes);

/// Publishes out/ of the set into the target (keystones last) and removes the set.
Status publishSet(const std::string& targetDir, const std::string& set, const std::vector<std::string>& keystones);

/// CRC-32 of a file's first `size` bytes.
Result<std::uint32_t> crcOfFile(const std::string& path, std::uint64_t size, const std::function<bool()>& canceled);

} // namespace parts

} // namespace tessera
