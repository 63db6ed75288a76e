// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "listed_items.h"
#include "model/checkpoint.h"
#include "result.h"

#include <string>
#include <vector>

namespace tessera {

/// Where the refusal below sends a reader of the command line for the list of problems; the workbench names its
/// Summary page instead.
inline constexpr const char* kProblemsPointer = " (run 'tessera inspect' for details)";

/// Refuses a checkpoint the scan found problems in, listing the first 20 (`notDone`: "merged", "exported"). Writing
/// from such a checkpoint would give a model with holes or wrong values.
inline Status refuseCheckpointProblems(const CheckpointInfo& info, const std::string& notDone)
{
    if (info.problems.empty())
        return Status::success();
    std::vector<std::string> lines;
    for (const auto& p : info.problems)
        lines.push_back(p.text());
    return makeError("the checkpoint has " + std::to_string(info.problems.size()) + " problem(s) and is not " + notDone
                     + kProblemsPointer + ":" + listedItems(lines, 20));
}

} // namespace tessera
