// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The shared folder of a job split into parts (`tessera merge|split --part K/N`), on one machine or many sharing
// a file system, without a coordinator: every part finds the folder by name, writes its share into out/ and
// records it; the part that completes the set checks every record against the bytes on disk and publishes out/.
//
//   <target>/.tessera-parts-<id>/  (or <parent>/.<name>.tessera-parts-<id>/ when the target does not exist yet)
//     plan.json          the assignment, for --status (written by every part, same bytes)
//     out/               the output being written (published as a whole through OutputStaging::adopt())
//     part-K-of-N.json   part K's record: the byte ranges it wrote and their CRC-32, written once they are on disk
//     finishing          the claim of the process publishing the set (link()ed into place, so one wins; held with
//                        flock, so a dead finisher's claim is taken over by the next part that finishes)
//
// The folder's name can be guessed, so it is trusted only when it is a real folder of this user that no one else
// can write (mode 0700 when made here): nothing can be planted in it, and a set folder that is a link, or another
// user's, is refused. Its files are opened without following links, and publish checks that out/ holds exactly the
// files the job lists (publish/staged_files.h).

#include "result.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// Bytes [begin, end) of one output file (its path inside out/) and their CRC-32.
struct RecordedRange {
    std::string path;
    std::uint64_t begin = 0, end = 0;
    std::uint32_t crc = 0;
    bool sameBytes(const RecordedRange& o) const { return path == o.path && begin == o.begin && end == o.end; }
};

/// A process as a part's record or the publishing claim names it. Other processes, on other hosts, wrote these
/// files, so what is read is checked: the host is kept as written (escape it before showing it), the pid only when
/// it is a whole number a pid can be.
struct PartProcess {
    std::string host;
    std::optional<long> pid; ///< nullopt when missing or not a pid (negative, fractional, past 2^31 - 1, text)
};

/// A part's record: what it wrote, and the job's own data (a JSON object as text, e.g. a DCP file's items).
struct PartRecord {
    unsigned part = 0;
    std::vector<RecordedRange> ranges;
    std::string extraJson = "{}";
    std::uint64_t bytes = 0;
    double seconds = 0;
    PartProcess process; ///< who wrote it, as the record says (only shown, never trusted)
};

/// A shared folder of a split job into a target, as `--status` reports it.
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

/// The right to publish a complete set, held until destroyed; empty when another live process holds it.
class PublishClaim {
public:
    PublishClaim();
    PublishClaim(PublishClaim&&) noexcept;
    PublishClaim& operator=(PublishClaim&&) noexcept;
    ~PublishClaim();
    explicit operator bool() const { return m_fd >= 0; }

private:
    friend class PartSet;
    int m_fd = -1;
    int m_previous = -1; ///< a dead holder's claim, kept locked so no third process takes it over too
};

class PartSet {
public:
    /// plan.json's text for a set of `parts` parts.
    static std::string planJson(const std::string& id, unsigned parts, const std::string& target,
                                std::uint64_t totalBytes, const std::vector<std::uint64_t>& shareBytes,
                                const std::string& sharesJson = "");
    /// Finds the set `id` of `target`, or makes it (with its plan.json and out/) after `checkNew` passes. Removes
    /// what interrupted parts left beside sets (folders being retired or never put in place), telling `note`.
    static Result<PartSet> open(const std::string& target, const std::string& id, unsigned parts,
                                const std::string& planJson, const std::function<Status()>& checkNew,
                                const std::function<void(const std::string&)>& note);
    /// True when the set `id` of `target` exists (for the target's lock).
    static bool exists(const std::string& target, const std::string& id);
    /// Every set of `target` (inside it and beside it).
    static std::vector<PartsSetStatus> status(const std::string& target);
    /// Removes every set of `target` whose publish no live process holds, with the target's lock when a removed
    /// set held it; returns one note per set removed, and an error naming any set a live process is publishing.
    static Result<std::vector<std::string>> discardAll(const std::string& target);

    const std::string& folder() const { return m_folder; }
    const std::string& id() const { return m_id; }
    unsigned parts() const { return m_parts; }
    std::string outFolder() const;

    /// Part `part`'s record, if it has a valid one.
    std::optional<PartRecord> readRecord(unsigned part) const;
    /// Writes part `part`'s record (atomically; the set must still be there).
    Status writeRecord(const PartRecord& record) const;
    /// Removes a record before its part's bytes are written again, so no finisher trusts it meanwhile.
    void removeRecord(unsigned part) const;
    /// Parts without a record.
    std::vector<unsigned> missing() const;

    /// Checks `ranges` against the files in out/: each file a regular file of this user (never followed through a
    /// link), long enough, and each range's bytes with their recorded CRC-32. Returns the first range that does
    /// not match, described; nullopt when all do. `threads` ranges are read at once.
    Result<std::optional<std::string>> checkBytes(const std::vector<RecordedRange>& ranges, unsigned threads,
                                                  const std::function<bool()>& canceled) const;

    /// Claims the right to publish (see PublishClaim); `notes` says when a dead finisher's claim is taken over.
    Result<PublishClaim> claim(std::vector<std::string>& notes) const;
    /// True when a publish of out/ was decided (its journal committed): a finisher died before it removed the set.
    bool publishInterrupted() const;
    /// True when out/ was published by renaming it to the target (made whole with the set, out/ is missing only
    /// then): a finisher died before it removed the set.
    bool publishedWhole() const;
    /// Publishes exactly `files` of out/ into `target` (keystones last), or completes a decided publish of it.
    /// Returns true when it completed an earlier publish instead of publishing now. The set stays (see retire()).
    Result<bool> publish(const std::string& target, const std::vector<std::string>& files,
                         const std::vector<std::string>& keystones) const;
    /// Removes the set `id` of `target` if it exists (a published set a finisher did not remove).
    static void retireIfExists(const std::string& target, const std::string& id);
    /// Removes the set's folder (renamed first, so no part writes into a folder being removed).
    void retire() const;

private:
    std::string m_folder;
    std::string m_id;
    unsigned m_parts = 0;
};

/// The CRC-32 of bytes [begin, end) of `path`, opened without following a link.
Result<std::uint32_t> crcOfFileRange(const std::string& path, std::uint64_t begin, std::uint64_t end,
                                     const std::function<bool()>& canceled);

} // namespace tessera
