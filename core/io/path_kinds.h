// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What is at a path, asked without exceptions: the output staging and the merge parts decide on these before
// every rename, where std::filesystem's throwing overloads would turn a race with another process into a crash.

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace tessera {

/// Something is at `path`, a dangling symbolic link included.
bool pathExists(const std::filesystem::path& path);

/// Something is at `path` once symbolic links are followed: a dangling link is nothing.
bool existsFollowingLinks(const std::filesystem::path& path);

/// A folder, or a symbolic link to one.
bool isFolder(const std::filesystem::path& path);

/// A folder itself, not a symbolic link to one (a rename replaces a link but cannot replace a folder).
bool isRealFolder(const std::filesystem::path& path);

/// `path` made absolute and normal, without a trailing separator: "out/" and "./out" name the same target.
std::filesystem::path normalTarget(const std::string& path);

/// `path` made absolute and normal (fs::absolute throws when the working folder is gone: then `path` normal).
std::filesystem::path absoluteNormal(const std::filesystem::path& path);

/// The entries of folder `dir`; none, with `ec` saying why, when it cannot be read. Iterating a
/// fs::directory_iterator throws when a read fails midway; this never does.
std::vector<std::filesystem::directory_entry> folderEntries(const std::filesystem::path& dir, std::error_code& ec);

} // namespace tessera
