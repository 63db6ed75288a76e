// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// One writer per target. Two runs into one folder at once would each publish their own files beside the other's
// (a sharded model beside a single file, one model's config beside another's weights), so every run that writes a
// target holds its lock from its first check to its publish: a single merge, split or export for as long as it
// runs, and the parts of a split job (`--part K/N`, publish/part_set.h) together, from the first part that starts
// until the set is published or discarded.
//
// The lock is a small file created exclusively (O_EXCL: atomic on local file systems, NFS v3 and later, and Lustre,
// where flock() may be unsupported or local to a node): `<parent>/.<name>.tessera-lock` beside the target, or
// `<target>/.tessera-lock` when only the target itself can be written. It records who holds it: a run (host, pid,
// boot, process start time) or a set (its id). The rule for a lock left by a run that died:
//   - a run's lock is void when its host is this host and the process is gone (or the pid now names another
//     process, or the host rebooted); on another host, when the holder has not renewed it for two minutes (a live
//     run touches it every 20 seconds; times are read on the file system's clock, so hosts' clocks do not matter);
//   - a set's lock is void once its shared folder is gone (published or discarded), after a minute's grace for the
//     part that is creating it;
//   - once a set has published the target, its lock stays as a record of that (holding nothing), so that a part run
//     again knows its job is done.
// A void lock is taken over; a live one refuses the new run with a message that names the holder.

#include "result.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tessera {

/// Who holds a target's lock, as read from it.
struct LockHolder {
    bool set = false;      ///< the parts of a set, rather than one run
    std::string setId;
    std::string host;
    long long pid = 0;
    long long since = 0;   ///< seconds since the epoch
    std::string path;      ///< the lock file
    /// "a merge run by pid 4242 on node7 since 2026-12-03 14:02" / "the split job of set 1f2e… (parts)".
    std::string describe() const;
};

/// Tells whether the shared folder of set `id` exists for the target (publish/part_set.h answers it).
using SetExists = std::function<bool(const std::string& id)>;

class TargetLock {
public:
    /// Takes the lock of `target` for one run (`what`: "merge", "split"…, for messages), or refuses naming the
    /// holder. Renewed in the background while held; released by release() or the destructor.
    static Result<TargetLock> forRun(const std::string& target, const std::string& what, const SetExists& setExists);
    /// Takes the lock of `target` for the parts of set `id`, or joins it when another part of that set holds it.
    /// It stays after this process ends (the set goes on); release() removes it once the set is published.
    static Result<TargetLock> forSet(const std::string& target, const std::string& id, const SetExists& setExists);
    /// Removes the lock of `target` if set `id` holds it (the set was discarded).
    static void removeSetLock(const std::string& target, const std::string& id);
    /// True when the lock file records that set `id` published the target (see markPublished()).
    static bool publishedBy(const std::string& target, const std::string& id);
    /// Refuses, naming the holder, when another run holds `target`'s lock: what a run would be told, for --dry-run.
    static Status checkFree(const std::string& target, const SetExists& setExists);
    /// The live holder of `target`'s lock, if any (for --dry-run and --status); a void lock is not one.
    static std::optional<LockHolder> holder(const std::string& target, const SetExists& setExists);

    TargetLock();
    TargetLock(TargetLock&&) noexcept;
    TargetLock& operator=(TargetLock&&) noexcept;
    ~TargetLock();
    /// Removes the lock file if it is still this lock's (never another run's that took over a void one).
    void release();
    /// For a set: turns the lock into the record that the set published the target. It locks nothing (any run
    /// may take the target), but a part of the set run again (a scheduler's retry after a kill at the very end)
    /// recognises from it that its job is done, instead of beginning it again.
    Status markPublished();

    struct Held; ///< target_lock.cpp's

private:
    std::unique_ptr<Held> m_held;
};

} // namespace tessera
