// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// One part of a job split into parts, the same steps for every writer that can be split (a merge, a GGUF export,
// a split): take the target's lock for the set, open the set, complete a publish a dead finisher had decided, write
// this part's share unless its record already matches the bytes on disk, record it; and when every part's record is
// there, claim the set, check every recorded byte against the disk, write what only the whole set can have, and
// publish exactly the files the job lists. A rerun of any part, after any kill, only completes the set: it never
// republishes from a set it no longer has whole.

#include "publish/part_set.h"
#include "result.h"

#include <functional>
#include <string>
#include <vector>

namespace tessera {

/// What a writer brings to a part run.
struct PartJob {
    std::string target;
    std::string id;                   ///< the set's id: a hash of everything that changes the output
    unsigned part = 0, parts = 1;
    std::string planJson;             ///< plan.json (PartSet::planJson())
    std::string what = "merge";       ///< for messages: "merge", "split"
    unsigned threads = 1;             ///< for checking the recorded bytes
    std::function<bool()> canceled;
    std::function<void(const std::string&)> onNote;
    /// Refuses a target the output cannot go into, before a new set is made.
    std::function<Status()> checkNewTarget;
    /// The byte ranges part `k` writes, as the plan gives them (their CRC-32 unknown).
    std::function<std::vector<RecordedRange>(unsigned k)> expectedRanges;
    /// Writes this part's share into the folder `out`: the ranges with their CRC-32, and the job's own data.
    std::function<Result<PartRecord>(const std::string& out)> writeShare;
    /// Writes what only the complete set has into `out`, from every part's record; returns every file to
    /// publish (paths inside `out`), in publish order.
    std::function<Result<std::vector<std::string>>(const std::string& out, const std::vector<PartRecord>& records)>
        finish;
    std::vector<std::string> keystones; ///< published last, in order
};

/// What one part did.
struct PartRunOutcome {
    std::string setFolder;            ///< the shared folder (empty once published)
    std::uint64_t bytesWritten = 0;   ///< bytes this part wrote (0 when its bytes were already there)
    bool alreadyDone = false;         ///< its record was there and its bytes checked out: nothing rewritten
    std::vector<unsigned> missing;    ///< parts not done yet when this one finished
    bool published = false;           ///< this process published the set
    bool completedEarlier = false;    ///< ... by completing a publish a finisher that died had decided
    bool finishingElsewhere = false;  ///< the set is complete and another live process is publishing it
    std::vector<std::string> files;   ///< with `published` (not completedEarlier): the files published, in order
    std::vector<std::string> notes;
    double seconds = 0;
};

Result<PartRunOutcome> runPart(const PartJob& job);

} // namespace tessera
