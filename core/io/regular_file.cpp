// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/regular_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera {

namespace {

std::string kindOf(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a folder";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISREG(mode))
        return "a regular file";
    return "a special file";
}

} // namespace

Result<RegularFile> RegularFile::open(const std::string& path)
{
    // O_NONBLOCK: opening a FIFO for reading waits for a writer otherwise. It does not affect regular files.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return makeError(path + ": cannot open: " + std::strerror(errno));
    return adopt(fd, path);
}

Result<RegularFile> RegularFile::adopt(int fd, const std::string& path)
{
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return makeError(path + ": cannot stat: " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return makeError(path + ": is " + kindOf(st.st_mode) + ", not a regular file");
    }
    return RegularFile(fd, static_cast<std::uint64_t>(st.st_size));
}

RegularFile::RegularFile(RegularFile&& other) noexcept : m_fd(other.m_fd), m_size(other.m_size) { other.m_fd = -1; }

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept
{
    if (this != &other) {
        if (m_fd >= 0)
            ::close(m_fd);
        m_fd = other.m_fd;
        m_size = other.m_size;
        other.m_fd = -1;
    }
    return *this;
}

RegularFile::~RegularFile()
{
    if (m_fd >= 0)
        ::close(m_fd);
}

std::string describeFileKind(const std::string& path)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return errno == ENOENT ? "missing" : std::string("unreadable (") + std::strerror(errno) + ")";
    return kindOf(st.st_mode);
}

Result<std::uint64_t> readAt(int fd, std::uint8_t* dst, std::uint64_t length, std::uint64_t offset)
{
    std::uint64_t got = 0;
    while (got < length) {
        const ssize_t n = ::pread(fd, dst + got, static_cast<std::size_t>(length - got), static_cast<off_t>(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return makeError(std::string("cannot read: ") + std::strerror(errno));
        if (n == 0)
            break;
        got += static_cast<std::uint64_t>(n);
    }
    return got;
}

} // namespace tessera
