// SPDX-License-Identifier: GPL-3.0-or-later
#include "publish/staged_run.h"

#include "publish/part_set.h"

namespace tessera {

Result<StagedRun> StagedRun::begin(const std::string& target, const std::string& what,
                                   const std::function<Status()>& check,
                                   const std::function<void(const std::string&)>& onNote)
{
    StagedRun run;
    auto lock = TargetLock::forRun(target, what, [&](const std::string& id) { return PartSet::exists(target, id); });
    TESSERA_TRY(lock);
    run.m_lock = std::move(*lock);
    run.m_notes = OutputStaging::removeStale(target);
    if (onNote)
        for (const auto& note : run.m_notes)
            onNote(note);
    if (check)
        TESSERA_TRY(check());
    auto staging = OutputStaging::create(target);
    TESSERA_TRY(staging);
    run.m_staging.emplace(std::move(*staging));
    return run;
}

Status StagedRun::checkFree(const std::string& target)
{
    return TargetLock::checkFree(target, [&](const std::string& id) { return PartSet::exists(target, id); });
}

Status StagedRun::publish(const std::vector<std::string>& files, const std::vector<std::string>& keystones)
{
    TESSERA_TRY(m_staging->publish(files, keystones));
    m_lock.release();
    return Status::success();
}

} // namespace tessera
