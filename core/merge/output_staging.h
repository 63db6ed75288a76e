// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "result.h"

#include <string>
#include <vector>

namespace tessera {

/// A hidden temporary folder a merge writes into, published into the target folder only once complete.
///
/// Where it goes: inside the target when the target exists (`<target>/.tessera-partial-<pid>-<random>`), so the
/// final renames never cross file systems, even when the target is a mount point; beside it otherwise
/// (`<parent>/.<name>.tessera-partial-<pid>-<random>`), renamed to the target in one step at the end.
///
/// Crash safety: the folder is locked (flock) for as long as its process lives, so a later run targeting the
/// same folder recognises the folders of dead runs and removes them (removeStale()). Publishing into an existing
/// folder first moves aside the old "keystone" files (the single model file or the index, and config.json),
/// then moves the new files in and the new keystones last, keeping every replaced file until the end: after a
/// failure every move is undone, and after a kill the next run's removeStale() undoes it from a journal. So the
/// target is always either as it was or the complete new model; it never shows a complete-looking mix.
class OutputStaging {
public:
    /// Refuses, before anything is written, a target that cannot take the output: a path that exists but is not
    /// a folder, a folder (or, for a new target, the nearest existing parent) that cannot be written (read-only
    /// file system, no permission), or a final name in the target already taken by a folder.
    static Status checkTarget(const std::string& target, const std::vector<std::string>& finalNames);
    /// Removes the temporary folders dead runs left for `target` (undoing an interrupted publish first).
    /// Returns one note per folder removed, for the user.
    static std::vector<std::string> removeStale(const std::string& target);
    /// Creates and locks the temporary folder, creating missing parents of the target (removed again on failure).
    static Result<OutputStaging> create(const std::string& target);
    /// Takes over `folder`, a folder other processes filled for `target` (on the target's file system, e.g. a
    /// split merge's shared folder, see merge/merge_parts.h), to publish it: locks it (an error when another live
    /// process holds it), undoes an interrupted publish of it (the files it had moved into the target go back into
    /// it, the replaced ones back into the target), and keeps it when not published, so publishing can be retried.
    static Result<OutputStaging> adopt(const std::string& target, const std::string& folder);

    OutputStaging(OutputStaging&& other) noexcept;
    OutputStaging& operator=(OutputStaging&&) = delete;
    OutputStaging(const OutputStaging&) = delete;
    ~OutputStaging();

    const std::string& path() const { return m_temp; }     ///< where to write
    const std::string& target() const { return m_target; } ///< where it ends up
    /// Moves the written files into place; the caller has flushed them to disk. `keystones` are the names that
    /// make the folder look like a model (moved aside first, moved in last, in this order). Flushes the folders.
    Status publish(const std::vector<std::string>& keystones);
    /// Removes the temporary folder now (also done by the destructor).
    void discard();

private:
    OutputStaging() = default;
    Status publishInto(const std::vector<std::string>& keystones);

    std::string m_target;
    std::string m_temp;
    std::vector<std::string> m_createdParents; ///< innermost last
    int m_lock = -1;                           ///< the locked descriptor of the temporary folder
    bool m_active = false;
    bool m_keep = false;                       ///< adopted: discard() unlocks but does not remove the folder
};

} // namespace tessera
