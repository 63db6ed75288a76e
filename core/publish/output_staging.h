// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "result.h"

#include <string>
#include <vector>

namespace tessera {

/// A hidden temporary folder a run writes into, published into the target folder only once complete.
///
/// Where it goes: inside the target when the target exists (`<target>/.tessera-partial-<pid>-<random>`), so the
/// final renames never cross file systems, even when the target is a mount point; beside it otherwise
/// (`<parent>/.<name>.tessera-partial-<pid>-<random>`), renamed to the target in one step at the end.
///
/// Crash safety: the folder is locked (flock) for as long as its process lives, so a later run targeting the
/// same folder recognises the folders of dead runs and removes them (removeStale()). Publishing into an existing
/// folder goes through a journal (publish/publish_journal.h): written before the first move, it makes the publish
/// decided, and a run killed after it is completed by the next one; before it, the target is untouched. So the
/// target is always either as it was or the complete new output; it never shows a complete-looking mix.
///
/// What is published is exactly the list of files the writer gives publish(), checked to be regular files this
/// run wrote (publish/staged_files.h): never a link, a planted file, or anything the list does not name.
class OutputStaging {
public:
    /// Removes the temporary folders dead runs left for `target`, completing a publish one of them had decided
    /// (its journal was on disk) first. Returns one note per folder, for the user.
    static std::vector<std::string> removeStale(const std::string& target);
    /// Creates and locks the temporary folder, creating missing parents of the target (removed again on failure).
    static Result<OutputStaging> create(const std::string& target);
    /// Takes over `folder`, a folder other processes filled for `target` (on the target's file system, e.g. a
    /// split merge's shared folder, see publish/part_set.h), to publish it: locks it (an error when another live
    /// process holds it) and clears what a publish killed before its journal was committed left there. A publish
    /// whose journal was committed is completed at once: `completedEarlier()` then says so and there is nothing
    /// left to publish. The folder is never removed here: when not published, so that publishing can be retried;
    /// when published, its journal records it until the folder's owner removes it.
    static Result<OutputStaging> adopt(const std::string& target, const std::string& folder);

    OutputStaging(OutputStaging&& other) noexcept;
    OutputStaging& operator=(OutputStaging&&) = delete;
    OutputStaging(const OutputStaging&) = delete;
    OutputStaging& operator=(const OutputStaging&) = delete;
    ~OutputStaging();

    const std::string& path() const { return m_temp; }     ///< where to write
    const std::string& target() const { return m_target; } ///< where it ends up
    bool completedEarlier() const { return m_completedEarlier; }
    /// Moves exactly `files` (paths relative to path(), flushed by the caller) into place, after checking the
    /// folder holds those and nothing else. `keystones` are the top-level names that make the folder look like a
    /// model (moved aside first, moved in last, in this order). Flushes the folders.
    Status publish(const std::vector<std::string>& files, const std::vector<std::string>& keystones);
    /// Removes the temporary folder now (also done by the destructor).
    void discard();

private:
    OutputStaging() = default;
    Status publishInto(const std::vector<std::string>& names, const std::vector<std::string>& keystones);

    std::string m_target;
    std::string m_temp;
    std::vector<std::string> m_createdParents; ///< innermost last
    int m_lock = -1;                           ///< the locked descriptor of the temporary folder
    bool m_active = false;
    bool m_keep = false;                       ///< adopted: discard() unlocks but does not remove the folder
    bool m_completedEarlier = false;
};

} // namespace tessera
