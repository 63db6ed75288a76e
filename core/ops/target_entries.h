// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What a merge's or split's --target_dir already holds, named, so that nothing there is kept or replaced silently:
// the command line lists it, the workbench asks first.

#include <string>
#include <vector>

namespace tessera {

/// The sorted names of the entries of folder `target`; none when it does not exist or cannot be read (the target
/// checks say why). Another run's temporary folder (.tessera-…) is left out: the checks of the run handle it.
std::vector<std::string> targetEntryNames(const std::string& target);

/// The note a command prints about the `names` in `target` it keeps as they are (`action`: "merge", "split").
std::string keptFilesNote(const std::string& target, const std::vector<std::string>& names, const std::string& action);

} // namespace tessera
