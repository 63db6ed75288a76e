// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Reading a file of a folder someone else wrote without leaving that folder. A checkpoint's config folder may hold
// symbolic links; one that leads out (tokenizer.json → /etc/shadow, a private key) must never be read, copied into
// a published model or embedded in a GGUF file. The check is made by the kernel as the path is opened
// (openat2's RESOLVE_BENEATH), so a link swapped in after a check cannot win a race with it.

#include "io/regular_file.h"
#include "result.h"

#include <string>

namespace tessera {

/// Opens `root/relative` for reading, refusing it unless every step of the path, links included, stays inside
/// `root`, and it is a regular file. `relative` has no ".." step and does not start with '/'. The error names the
/// file and says why ("a symbolic link that leads out of <root>"). Where the kernel lacks openat2 (before Linux
/// 5.6), the path is resolved, checked to lie inside `root`, and opened without following a link at its end.
Result<RegularFile> openBeneath(const std::string& root, const std::string& relative);

/// True when `root/relative` can be opened by openBeneath(), without reading it.
bool staysBeneath(const std::string& root, const std::string& relative);

} // namespace tessera
