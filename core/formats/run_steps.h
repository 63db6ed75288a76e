// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The saved steps of a training run: every checkpoint a run root holds, in step order.

#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// One saved step of a run.
struct RunStep {
    long long step = 0;
    std::string folder;   ///< the step's own folder: RUN/global_step_N, RUN/iter_0000N00, RUN/step-N
    std::string path;     ///< what is scanned for it: the role folder of a verl step (global_step_N/actor), else `folder`
};

/// The step a folder's name says it holds: global_step_N, iter_N, step-N; nullopt for any other name.
std::optional<long long> stepOfFolderName(const std::string& name);

/// The saved steps of the run at `root`, ascending: verl's global_step_N (read at `role`: "actor" or "critic";
/// a step without that folder is listed with `path` the missing folder, so it is reported rather than skipped),
/// Megatron's iter_N, torchtitan's step-N (also under a `checkpoint/` folder), in any mix. `root` may also be a
/// single step's folder, which is then the run's only step. An Error when `root` holds no step, naming what was
/// looked for.
Result<std::vector<RunStep>> findRunSteps(const std::string& root, const std::string& role = "actor");

} // namespace tessera
