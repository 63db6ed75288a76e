// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A single-process run that publishes into a target (a merge, a GGUF export, a split): it holds the target's lock
// from its checks to its publish (publish/target_lock.h), removes what dead runs left first, writes into a staging
// folder and publishes exactly the files it lists (publish/output_staging.h).

#include "publish/output_staging.h"
#include "publish/target_lock.h"
#include "result.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

class StagedRun {
public:
    /// Takes the target's lock (`what` names the run in another run's refusal), removes dead runs' folders
    /// (telling `onNote`), runs `check` (the writer's checks of the target, now that the space dead runs held is
    /// free), then creates the staging folder.
    static Result<StagedRun> begin(const std::string& target, const std::string& what,
                                   const std::function<Status()>& check,
                                   const std::function<void(const std::string&)>& onNote);

    /// Refuses, naming it, when another run or job in parts is writing `target`: what begin() would be told
    /// (for --dry-run).
    static Status checkFree(const std::string& target);

    const std::string& path() const { return m_staging->path(); }     ///< where to write
    const std::string& target() const { return m_staging->target(); } ///< where it ends up
    const std::vector<std::string>& notes() const { return m_notes; }  ///< what begin() did besides
    /// Publishes exactly `files` (paths inside path()); see OutputStaging::publish(). Releases the lock.
    Status publish(const std::vector<std::string>& files, const std::vector<std::string>& keystones);

private:
    TargetLock m_lock;
    std::optional<OutputStaging> m_staging;
    std::vector<std::string> m_notes;
};

} // namespace tessera
