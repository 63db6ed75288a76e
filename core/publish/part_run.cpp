// SPDX-License-Identifier: GPL-3.0-or-later
#include "publish/part_run.h"

#include "io/path_kinds.h"
#include "publish/output_staging.h"
#include "publish/target_checks.h"
#include "publish/target_lock.h"

#include <chrono>

namespace tessera {

namespace {

struct PartRunContext {
    const PartJob& job;
    PartRunOutcome& outcome;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

    void note(const std::string& text)
    {
        outcome.notes.push_back(text);
        if (job.onNote)
            job.onNote(text);
    }
    double seconds() const
    {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
};

/// True when `record` lists exactly the ranges the plan gives its part.
bool listsPlannedRanges(const PartRecord& record, const std::vector<RecordedRange>& planned)
{
    if (record.ranges.size() != planned.size())
        return false;
    for (std::size_t i = 0; i < planned.size(); ++i)
        if (!record.ranges[i].sameBytes(planned[i]))
            return false;
    return true;
}

/// This part's bytes: checked when a record says they are there, else written and recorded.
Status writeOwnShare(PartRunContext& run, const PartSet& set)
{
    const PartJob& job = run.job;
    const auto planned = job.expectedRanges(job.part);
    if (auto record = set.readRecord(job.part); record && listsPlannedRanges(*record, planned)) {
        auto mismatch = set.checkBytes(record->ranges, job.threads, job.canceled);
        TESSERA_TRY(mismatch);
        run.outcome.alreadyDone = !*mismatch;
        if (*mismatch)
            run.note("the bytes part " + std::to_string(job.part) + " recorded have changed since (" + **mismatch
                     + "); writing them again");
    }
    if (run.outcome.alreadyDone)
        return Status::success();
    set.removeRecord(job.part);
    auto written = job.writeShare(set.outFolder());
    TESSERA_TRY(written);
    if (!listsPlannedRanges(*written, planned))
        return makeError("internal: part " + std::to_string(job.part) + " wrote other byte ranges than planned");
    written->part = job.part;
    written->seconds = run.seconds();
    run.outcome.bytesWritten = written->bytes;
    return set.writeRecord(*written);
}

/// Every part's record, checked against the plan and against the bytes on disk. A part whose bytes no longer match
/// (a shared file removed, cut short or changed since it recorded them) loses its record, so that running it again
/// writes them again, and nothing is published.
Result<std::vector<PartRecord>> verifiedRecords(PartRunContext& run, const PartSet& set)
{
    const PartJob& job = run.job;
    std::vector<PartRecord> records;
    for (unsigned k = 0; k < job.parts; ++k) {
        auto record = set.readRecord(k);
        if (!record || !listsPlannedRanges(*record, job.expectedRanges(k))) {
            set.removeRecord(k);
            return makeError("part " + std::to_string(k) + "'s record in " + set.folder()
                             + " does not list the byte ranges of the plan; run part " + std::to_string(k) + "/"
                             + std::to_string(job.parts) + " again. Nothing was published");
        }
        auto mismatch = set.checkBytes(record->ranges, job.threads, job.canceled);
        TESSERA_TRY(mismatch);
        if (*mismatch) {
            set.removeRecord(k);
            return makeError(**mismatch + ": part " + std::to_string(k) + "'s bytes changed after it recorded them; "
                             "run part " + std::to_string(k) + "/" + std::to_string(job.parts)
                             + " again to write them. Nothing was published");
        }
        records.push_back(std::move(*record));
    }
    return records;
}

/// The end of every published set, whoever gets there: the lock records the publish, then the set goes. A kill
/// between the two leaves a set the next part recognises as published (its journal, or its out/ gone).
Status endPublishedSet(PartRunContext& run, const PartSet& set, TargetLock& lock, bool earlier)
{
    run.outcome.published = true;
    run.outcome.completedEarlier = earlier;
    if (earlier)
        run.note("completed the publish of " + normalTarget(run.job.target).string()
                 + " that a part stopped before it was done");
    TESSERA_TRY(lock.markPublished());
    set.retire();
    run.outcome.setFolder.clear();
    return Status::success();
}

/// Publishes what the claimant has: completes a publish a dead finisher decided, or publishes the verified set.
Status finishSet(PartRunContext& run, const PartSet& set, TargetLock& lock)
{
    const PartJob& job = run.job;
    if (set.publishedWhole())
        return endPublishedSet(run, set, lock, true);
    std::vector<std::string> files;
    if (!set.publishInterrupted()) {
        auto records = verifiedRecords(run, set);
        TESSERA_TRY(records);
        auto finished = job.finish(set.outFolder(), *records);
        TESSERA_TRY(finished);
        files = std::move(*finished);
    }
    auto earlier = set.publish(job.target, files, job.keystones);
    TESSERA_TRY(earlier);
    if (!*earlier)
        run.outcome.files = std::move(files);
    return endPublishedSet(run, set, lock, *earlier);
}

/// True when the target holds the output of set `id` already: its lock records that the set published it, and
/// the names that make it complete are there.
bool alreadyPublished(const PartJob& job)
{
    if (!TargetLock::publishedBy(job.target, job.id))
        return false;
    for (const auto& name : job.keystones)
        if (!pathExists(normalTarget(job.target) / name))
            return false;
    return true;
}

} // namespace

Result<PartRunOutcome> runPart(const PartJob& job)
{
    if (job.parts == 0 || job.part >= job.parts)
        return makeError("part " + std::to_string(job.part) + " does not exist: parts are numbered 0 to "
                         + std::to_string(job.parts == 0 ? 0 : job.parts - 1));
    PartRunOutcome outcome;
    PartRunContext run { job, outcome };
    TESSERA_TRY(checkTarget(job.target, {}));
    if (alreadyPublished(job)) {
        // Run again after the set published (a retry of a part killed at its very end): its job is done.
        PartSet::retireIfExists(job.target, job.id);
        outcome.published = outcome.completedEarlier = true;
        run.note("this job already published " + normalTarget(job.target).string() + "; nothing to do");
        return outcome;
    }
    for (const auto& n : OutputStaging::removeStale(job.target))
        run.note(n);
    const SetExists setExists = [&](const std::string& id) { return PartSet::exists(job.target, id); };
    auto lock = TargetLock::forSet(job.target, job.id, setExists);
    TESSERA_TRY(lock);
    auto set = PartSet::open(job.target, job.id, job.parts, job.planJson, job.checkNewTarget,
                             [&](const std::string& text) { run.note(text); });
    TESSERA_TRY(set);
    outcome.setFolder = set->folder();

    // A finisher that died after deciding its publish: whoever comes next completes it, and writes nothing.
    if (!set->publishInterrupted() && !set->publishedWhole()) {
        TESSERA_TRY(writeOwnShare(run, *set));
        outcome.missing = set->missing();
        outcome.seconds = run.seconds();
        if (!outcome.missing.empty())
            return outcome;
    }
    auto claim = set->claim(outcome.notes);
    TESSERA_TRY(claim);
    if (!*claim) {
        outcome.finishingElsewhere = true;
        return outcome;
    }
    TESSERA_TRY(finishSet(run, *set, *lock));
    outcome.seconds = run.seconds();
    return outcome;
}

} // namespace tessera
