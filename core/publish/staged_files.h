// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What a staging folder may publish: exactly the files the run that fills it says it wrote, each a regular file of
// the running user's with no other name (no symbolic link, no hard link to a file elsewhere), in folders of its
// own. A folder whose name others can guess (a split merge's shared folder) could otherwise be made to publish a
// link to a private file, or a file planted beside the ones written.

#include "result.h"

#include <string>
#include <vector>

namespace tessera {

/// Checks `folder` against `files` (paths relative to it, "lora_adapter/adapter_config.json"): every file is
/// there as a regular file owned by this user with one link, every folder on their paths is a real folder, and
/// the folder holds nothing else (the publish journal's bookkeeping aside). Returns the top-level names to move,
/// in the order the files first name them; the error names every entry that is not as it should be.
Result<std::vector<std::string>> checkStagedFiles(const std::string& folder, const std::vector<std::string>& files);

} // namespace tessera
