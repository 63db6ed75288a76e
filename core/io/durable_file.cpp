// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace tessera {

namespace {

/// Closes a descriptor on every path out of a function.
struct Descriptor {
    int fd = -1;
    ~Descriptor()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

Status failure(const std::string& path, const char* what)
{
    return makeError(path + ": " + what + ": " + std::strerror(errno));
}

Status writeAll(int fd, const char* data, std::size_t length, const std::string& path)
{
    while (length > 0) {
        const ssize_t n = ::write(fd, data, length);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return failure(path, "cannot be written");
        }
        data += n;
        length -= static_cast<std::size_t>(n);
    }
    return Status::success();
}

/// fsync, then close: the close can report a deferred write error (NFS), so its result counts too.
Status syncAndClose(Descriptor& out, const std::string& path)
{
    if (::fsync(out.fd) != 0)
        return failure(path, "cannot be flushed to disk");
    const int fd = out.fd;
    out.fd = -1;
    if (::close(fd) != 0)
        return failure(path, "cannot be closed");
    return Status::success();
}

} // namespace

Status writeFileSynced(const std::string& path, const std::string& bytes)
{
    Descriptor out { ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) };
    if (out.fd < 0)
        return failure(path, "cannot be created");
    TESSERA_TRY(writeAll(out.fd, bytes.data(), bytes.size(), path));
    return syncAndClose(out, path);
}

Status copyFileSynced(const std::string& from, const std::string& to)
{
    Descriptor in { ::open(from.c_str(), O_RDONLY | O_CLOEXEC) };
    if (in.fd < 0)
        return failure(from, "cannot be opened");
    Descriptor out { ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) };
    if (out.fd < 0)
        return failure(to, "cannot be created");
    std::vector<char> buffer(1u << 20);
    for (;;) {
        const ssize_t n = ::read(in.fd, buffer.data(), buffer.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return failure(from, "cannot be read");
        }
        if (n == 0)
            break;
        TESSERA_TRY(writeAll(out.fd, buffer.data(), static_cast<std::size_t>(n), to));
    }
    return syncAndClose(out, to);
}

Status syncFolder(const std::string& dir)
{
    Descriptor folder { ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) };
    if (folder.fd < 0)
        return failure(dir, "cannot be opened");
    // Some file systems do not support fsync on folders (EINVAL); their renames are as durable as they get.
    if (::fsync(folder.fd) != 0 && errno != EINVAL && errno != EROFS)
        return failure(dir, "cannot be flushed to disk");
    return Status::success();
}

Status createFolders(const std::string& dir)
{
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
        return makeError(dir + ": the folder cannot be created: " + ec.message());
    return Status::success();
}

Status writeAllAt(int fd, const std::uint8_t* data, std::uint64_t length, std::uint64_t offset, const std::string& what)
{
    while (length > 0) {
        const ssize_t n = ::pwrite(fd, data, std::min<std::uint64_t>(length, 1u << 30), static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return makeError(what + ": write failed: " + std::strerror(errno));
        }
        data += n;
        length -= static_cast<std::uint64_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
    return Status::success();
}

void startWriteback(int fd, std::uint64_t offset, std::uint64_t length)
{
    (void)::sync_file_range(fd, static_cast<off64_t>(offset), static_cast<off64_t>(length), SYNC_FILE_RANGE_WRITE);
}

} // namespace tessera
