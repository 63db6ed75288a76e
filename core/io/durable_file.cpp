// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>

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
    Descriptor out { ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644) };
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
    return copyOpenFileSynced(in.fd, from, to);
}

namespace {

/// Copies the open file `fromFd` from its start into the open file `out` (`to` names it in errors).
Status copyInto(int fromFd, const std::string& from, int out, const std::string& to)
{
    // A buffer the file's size up to 1 MiB, left uninitialised: most of what is copied is a config or a tokenizer
    // of a few kilobytes, and zeroing a fresh megabyte for each cost more than the copy.
    struct stat st {};
    const std::size_t size = ::fstat(fromFd, &st) == 0 && st.st_size > 0
        ? std::min<std::size_t>(static_cast<std::size_t>(st.st_size) + 1, 1u << 20)
        : (1u << 16);
    const std::unique_ptr<char[]> buffer(new char[size]);
    for (off_t at = 0;;) {
        const ssize_t n = ::pread(fromFd, buffer.get(), size, at);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return failure(from, "cannot be read");
        }
        if (n == 0)
            return Status::success();
        at += n;
        TESSERA_TRY(writeAll(out, buffer.get(), static_cast<std::size_t>(n), to));
    }
}

/// Replaces `path` with what `fill` writes into a fresh, exclusively created sibling, flushed, then renamed over it.
Status replaceAtomically(const std::string& path, const std::function<Status(int fd, const std::string& temp)>& fill)
{
    std::string temp;
    Descriptor out;
    for (int attempt = 0; attempt < 8 && out.fd < 0; ++attempt) {
        temp = uniqueSiblingName(path, "tessera-new");
        out.fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (out.fd < 0 && errno != EEXIST)
            break;
    }
    if (out.fd < 0)
        return failure(path, "cannot be written (no temporary file beside it)");
    Status written = fill(out.fd, temp);
    if (written)
        written = syncAndClose(out, temp);
    if (written && ::rename(temp.c_str(), path.c_str()) != 0)
        written = failure(path, "cannot be replaced");
    if (!written) {
        ::unlink(temp.c_str());
        return written;
    }
    const auto folder = std::filesystem::path(path).parent_path();
    return syncFolder(folder.empty() ? "." : folder.string());
}

} // namespace

Status copyOpenFileSynced(int fromFd, const std::string& from, const std::string& to)
{
    Descriptor out { ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644) };
    if (out.fd < 0)
        return failure(to, "cannot be created");
    TESSERA_TRY(copyInto(fromFd, from, out.fd, to));
    return syncAndClose(out, to);
}

Status copyFileAtomically(const std::string& from, const std::string& to)
{
    Descriptor in { ::open(from.c_str(), O_RDONLY | O_CLOEXEC) };
    if (in.fd < 0)
        return failure(from, "cannot be opened");
    return replaceAtomically(to, [&](int fd, const std::string& temp) { return copyInto(in.fd, from, fd, temp); });
}

std::string uniqueSiblingName(const std::string& path, const std::string& tag)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::random_device device;
    std::mt19937_64 gen((static_cast<std::uint64_t>(device()) << 32) ^ device());
    std::string random(12, 'x');
    for (auto& c : random)
        c = chars[gen() % (sizeof(chars) - 1)];
    const std::filesystem::path p(path);
    return (p.parent_path() / ("." + p.filename().string() + "." + tag + "-" + std::to_string(::getpid()) + "-"
                               + random))
        .string();
}

Status replaceFileAtomically(const std::string& path, const std::string& bytes)
{
    return replaceAtomically(path, [&](int fd, const std::string& temp) {
        return writeAll(fd, bytes.data(), bytes.size(), temp);
    });
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
