// SPDX-License-Identifier: GPL-3.0-or-later
#include "publish/target_checks.h"

#include "io/path_kinds.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// `path` with every link resolved, also where its end does not exist yet.
fs::path resolved(const std::string& path)
{
    std::error_code ec;
    fs::path p = fs::weakly_canonical(normalTarget(path), ec);
    return ec ? normalTarget(path) : p;
}

/// `inner` is `outer` or lies below it.
bool within(const fs::path& inner, const fs::path& outer)
{
    const auto rel = inner.lexically_relative(outer);
    return !rel.empty() && *rel.begin() != "..";
}

} // namespace

Status checkTarget(const std::string& target, const std::vector<std::string>& finalNames)
{
    if (target.empty())
        return makeError("no target folder given");
    const fs::path t = normalTarget(target);
    struct stat st {};
    if (::stat(t.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return makeError(t.string() + " exists and is not a folder; choose another target folder");
        if (::access(t.c_str(), W_OK | X_OK) != 0)
            return makeError(t.string() + ": cannot write into this folder (" + std::strerror(errno)
                             + "); choose another target folder");
        for (const auto& name : finalNames)
            if (isRealFolder(t / name))
                return makeError((t / name).string() + " is a folder, but the output has a file of that name; "
                                 "move it away or choose another target folder");
        return Status::success();
    }
    // A new target: it is created inside its nearest existing ancestor, which must be a writable folder.
    fs::path ancestor = t.parent_path();
    while (!pathExists(ancestor) && ancestor != ancestor.parent_path())
        ancestor = ancestor.parent_path();
    if (!isFolder(ancestor))
        return makeError(ancestor.string() + " is not a folder, so " + t.string() + " cannot be created");
    if (::access(ancestor.c_str(), W_OK | X_OK) != 0)
        return makeError(ancestor.string() + ": cannot create " + t.string() + " there (" + std::strerror(errno)
                         + "); choose another target folder");
    return Status::success();
}

Status checkTargetApart(const std::string& target, const std::vector<std::string>& sources)
{
    const fs::path t = resolved(target);
    for (const auto& source : sources) {
        if (source.empty())
            continue;
        const fs::path s = resolved(source);
        if (t == s)
            return makeError(target + " is the folder the run reads (" + source
                             + "); writing there would replace what is being read. Choose another target folder");
        if (within(s, t))
            return makeError(target + " holds " + source + ", which the run reads; choose a target folder outside it");
        if (within(t, s))
            return makeError(target + " lies inside " + source + ", which the run reads; choose a target folder "
                                      "outside it");
    }
    return Status::success();
}

} // namespace tessera
