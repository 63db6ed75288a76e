// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Checks every writer makes of its target before it writes anything, so that a target it cannot complete is
// refused with a reason, never discovered half-way.

#include "result.h"

#include <string>
#include <vector>

namespace tessera {

/// Refuses a target that cannot take the output: a path that exists but is not a folder, a folder (or, for a new
/// target, the nearest existing parent) that cannot be written (read-only file system, no permission), or a final
/// name in the target already taken by a folder.
Status checkTarget(const std::string& target, const std::vector<std::string>& finalNames);

/// Refuses a target that is one of the folders the run reads (`sources`: the checkpoint, its config folder, a base
/// model…), holds one, or lies inside one: publishing there would replace or mix with what is being read. Links
/// are resolved on both sides.
Status checkTargetApart(const std::string& target, const std::vector<std::string>& sources);

} // namespace tessera
