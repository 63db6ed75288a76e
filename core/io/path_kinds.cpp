// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/path_kinds.h"

#include <sys/stat.h>

namespace fs = std::filesystem;

namespace tessera {

bool pathExists(const fs::path& path)
{
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

bool existsFollowingLinks(const fs::path& path)
{
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

bool isFolder(const fs::path& path)
{
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isRealFolder(const fs::path& path)
{
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

fs::path absoluteNormal(const fs::path& path)
{
    std::error_code ec;
    const fs::path absolute = fs::absolute(path, ec);
    return (ec ? path : absolute).lexically_normal();
}

std::vector<fs::directory_entry> folderEntries(const fs::path& dir, std::error_code& ec)
{
    std::vector<fs::directory_entry> entries;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        entries.push_back(*it);
    if (ec)
        entries.clear();
    return entries;
}

fs::path normalTarget(const std::string& path)
{
    std::error_code ec;
    fs::path p = fs::absolute(path, ec).lexically_normal();
    if (!p.has_filename() && p.has_parent_path() && p != p.root_path())
        p = p.parent_path();
    return p;
}

} // namespace tessera
