// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The one place every reader opens a file from disk. A FIFO in place of a rank file would block open() forever,
// and /dev/zero would never end, so a file is opened without blocking and refused unless it is a regular file.

#include "result.h"

#include <cstdint>
#include <string>

namespace tessera {

/// An open, read-only file descriptor of a regular file; closed on destruction.
class RegularFile {
public:
    /// Opens `path` without blocking and checks it is a regular file. The error names the path and what it is
    /// instead ("is a FIFO (named pipe), not a regular file").
    static Result<RegularFile> open(const std::string& path);
    /// Takes over the open descriptor `fd` (closed on every path) if it is a regular file; `path` names it.
    static Result<RegularFile> adopt(int fd, const std::string& path);
    RegularFile(RegularFile&& other) noexcept;
    RegularFile& operator=(RegularFile&& other) noexcept;
    RegularFile(const RegularFile&) = delete;
    RegularFile& operator=(const RegularFile&) = delete;
    ~RegularFile();

    int fd() const { return m_fd; }
    std::uint64_t size() const { return m_size; }

private:
    RegularFile(int fd, std::uint64_t size) : m_fd(fd), m_size(size) { }
    int m_fd = -1;
    std::uint64_t m_size = 0;
};

/// Reads `length` bytes at `offset` of the open descriptor `fd` into `dst`, through short reads and interruptions:
/// how many it read (fewer only where the file ends), or an error "cannot read: …" (the caller names the file).
Result<std::uint64_t> readAt(int fd, std::uint8_t* dst, std::uint64_t length, std::uint64_t offset);

/// "a folder", "a FIFO (named pipe)", "a character device", … for a path that exists but is not a regular file
/// (symlinks are followed); "missing" when nothing is there. For messages.
std::string describeFileKind(const std::string& path);

} // namespace tessera
