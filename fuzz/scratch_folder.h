// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Several parsers only take a path (they map the file, or look for siblings next to it). Their fuzz targets
// write each input into one private folder per process, reused for every input, so a run does not litter /tmp
// and the parser reads exactly the bytes the fuzzer made.

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::fuzz {

/// The process's scratch folder (created on first use, removed at exit).
const std::string& scratchFolder();

/// Writes `size` bytes to `scratchFolder()/name` (replacing it; `name` may hold sub-folders, made as needed) and returns its path. Aborts when the disk
/// refuses, because a target that silently read a stale file would report nonsense.
std::string writeScratchFile(const std::string& name, const std::uint8_t* data, std::size_t size);
std::string writeScratchFile(const std::string& name, const std::string& bytes);

/// Removes `scratchFolder()/name` if it is there (a target that switches between inputs of different kinds).
void removeScratchFile(const std::string& name);

} // namespace tessera::fuzz
