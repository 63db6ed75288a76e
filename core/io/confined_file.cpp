// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/confined_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

namespace {

constexpr int kReadFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;

/// openat2() beneath `rootFd`; -1 with errno ENOSYS where the kernel (or a seccomp filter) does not have it.
int openat2Beneath(int rootFd, const std::string& relative)
{
    open_how how {};
    how.flags = kReadFlags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (;;) {
        const long fd = ::syscall(SYS_openat2, rootFd, relative.c_str(), &how, sizeof how);
        if (fd >= 0 || errno != EAGAIN) // EAGAIN: a rename raced the lookup; the kernel asks to retry
            return static_cast<int>(fd);
    }
}

/// The fallback: the real path must lie inside the real root, and the final step is opened without following.
int openCheckedBeneath(const std::string& root, const std::string& relative)
{
    char realRoot[PATH_MAX];
    char realFile[PATH_MAX];
    if (!::realpath(root.c_str(), realRoot) || !::realpath((fs::path(root) / relative).c_str(), realFile))
        return -1;
    const std::string inside = std::string(realRoot) + "/";
    if (std::string(realFile).rfind(inside, 0) != 0) {
        errno = EXDEV;
        return -1;
    }
    return ::open(realFile, kReadFlags | O_NOFOLLOW);
}

bool hasParentStep(const std::string& relative)
{
    if (relative.empty() || relative.front() == '/')
        return true;
    for (const auto& step : fs::path(relative))
        if (step == "..")
            return true;
    return false;
}

} // namespace

Result<RegularFile> openBeneath(const std::string& root, const std::string& relative)
{
    const std::string shown = (fs::path(root) / relative).string();
    if (hasParentStep(relative))
        return makeError(shown + ": not a file name inside " + root);
    const int rootFd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootFd < 0)
        return makeError(root + ": cannot open the folder: " + std::strerror(errno));
    int fd = openat2Beneath(rootFd, relative);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM))
        fd = openCheckedBeneath(root, relative);
    const int openError = errno;
    ::close(rootFd);
    if (fd < 0) {
        if (openError == EXDEV || openError == ELOOP)
            return makeError(shown + ": a symbolic link that leads out of " + root + "; not read");
        return makeError(shown + ": cannot open: " + std::strerror(openError));
    }
    return RegularFile::adopt(fd, shown);
}

bool staysBeneath(const std::string& root, const std::string& relative)
{
    return openBeneath(root, relative).ok();
}

} // namespace tessera
