// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "result.h"

#include <cstdint>
#include <string>

namespace tessera {

/// Small-file writes that are on disk when they return: the output of a merge is published by renames, and a
/// rename must never make a name point at data still only in the page cache (a crash would leave an empty or
/// partial file under a final name). Errors name the file and say why (e.g. "No space left on device").

/// Every file written here is opened without following a symbolic link at its name: a link planted where an
/// output goes would otherwise make Tessera write through it, outside the folder it writes.

/// Creates or truncates `path`, writes `bytes` and flushes them to disk. A symbolic link at `path` is refused.
Status writeFileSynced(const std::string& path, const std::string& bytes);
/// Copies `from` to `to` byte for byte (replacing `to`) and flushes the copy to disk. A symbolic link at `to` is
/// refused.
Status copyFileSynced(const std::string& from, const std::string& to);
/// Copies the open file `fromFd` (read from its start; `from` names it in errors) to `to`, as copyFileSynced().
Status copyOpenFileSynced(int fromFd, const std::string& from, const std::string& to);
/// Replaces `path` with a file holding `bytes`, atomically: written and flushed under a fresh name in the same
/// folder (created exclusively, so nothing planted there is ever opened), then renamed over `path`. Readers see
/// the old content or the new, never a part; several processes writing the same bytes do not disturb each other.
Status replaceFileAtomically(const std::string& path, const std::string& bytes);
/// Replaces `to` with a copy of `from`, atomically as replaceFileAtomically() does, streamed (never held whole).
Status copyFileAtomically(const std::string& from, const std::string& to);
/// A name for a temporary file or folder beside `path` that no other process picks: ".<name>.<tag>-<pid>-<random>".
std::string uniqueSiblingName(const std::string& path, const std::string& tag);
/// Flushes a folder's entries (created, renamed or removed names) to disk.
Status syncFolder(const std::string& dir);
/// Creates folder `dir` and the folders above it that are missing; the error names the folder and says why
/// ("No space left on device" when the disk is out of inodes, "File exists" when a file has its name).
Status createFolders(const std::string& dir);

/// Starts writing bytes [offset, offset + length) of `fd` to disk without waiting for them. A large output that
/// is flushed at the end anyway is flushed while the rest is still being produced, not all at once after it:
/// below the kernel's dirty threshold (a tenth of memory) nothing would start it before the fdatasync. A hint:
/// file systems without it (sync_file_range) are simply left to the final flush.
void startWriteback(int fd, std::uint64_t offset, std::uint64_t length);

/// Writes `length` bytes at `offset` of the open file `fd`, however many pwrite() calls that takes (it may write
/// less than asked, and is interrupted by signals). `what` names the file and tensor in the error.
Status writeAllAt(int fd, const std::uint8_t* data, std::uint64_t length, std::uint64_t offset, const std::string& what);

} // namespace tessera
