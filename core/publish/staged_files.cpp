// SPDX-License-Identifier: GPL-3.0-or-later
#include "publish/staged_files.h"

#include "publish/publish_journal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// What is wrong with a staged entry that should be a file of this run; empty when nothing is.
std::string fileProblem(const fs::path& path)
{
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0)
        return "missing";
    if (S_ISLNK(st.st_mode))
        return "a symbolic link, not a file this run wrote";
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    if (st.st_uid != ::geteuid())
        return "owned by another user (uid " + std::to_string(st.st_uid) + "), not a file this run wrote";
    if (st.st_nlink != 1)
        return "has " + std::to_string(st.st_nlink) + " names (a hard link), not a file this run wrote";
    return {};
}

} // namespace

Result<std::vector<std::string>> checkStagedFiles(const std::string& folder, const std::vector<std::string>& files)
{
    std::vector<std::string> problems;
    std::set<std::string> expected;
    std::set<std::string> folders; // every folder on a listed file's path
    std::vector<std::string> topLevel;
    for (const auto& file : files) {
        const fs::path rel = fs::path(file).lexically_normal();
        if (rel.empty() || rel.is_absolute() || *rel.begin() == "..") {
            problems.push_back(file + ": not a path inside the output");
            continue;
        }
        expected.insert(rel.string());
        for (fs::path p = rel.parent_path(); !p.empty(); p = p.parent_path())
            folders.insert(p.string());
        const std::string top = rel.begin()->string();
        if (std::find(topLevel.begin(), topLevel.end(), top) == topLevel.end())
            topLevel.push_back(top);
        if (auto problem = fileProblem(fs::path(folder) / rel); !problem.empty())
            problems.push_back((fs::path(folder) / rel).string() + ": " + problem);
    }
    // Nothing else may be there: walk the folder without following links.
    std::error_code ec;
    fs::recursive_directory_iterator it(folder, fs::directory_options::none, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const fs::path rel = it->path().lexically_relative(folder);
        if (it.depth() == 0 && isJournalBookkeeping(rel.string())) {
            it.disable_recursion_pending();
            continue;
        }
        const bool isFolder = it->is_directory(ec) && !it->is_symlink(ec);
        if (isFolder && folders.count(rel.string()))
            continue;
        if (!isFolder && expected.count(rel.string()))
            continue;
        problems.push_back(it->path().string() + ": not written by this run");
        if (isFolder)
            it.disable_recursion_pending();
    }
    if (ec)
        problems.push_back(folder + ": cannot be listed: " + ec.message());
    if (!problems.empty()) {
        std::string text;
        for (const auto& p : problems)
            text += "\n  " + p;
        return makeError("the output in " + folder + " is not exactly the files written, so nothing was published:"
                         + text);
    }
    return topLevel;
}

} // namespace tessera
