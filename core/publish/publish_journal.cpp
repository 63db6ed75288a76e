// SPDX-License-Identifier: GPL-3.0-or-later
#include "publish/publish_journal.h"

#include "io/durable_file.h"
#include "io/path_kinds.h"
#include "io/text_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace fs = std::filesystem;

namespace tessera {

namespace {

constexpr const char* kJournal = ".publish-journal";
constexpr const char* kReplaced = ".replaced";
constexpr const char* kHeader = "tessera-publish-journal 2";

/// A name the journal may hold: one entry of the staging folder, never a path that could lead elsewhere.
bool isPlainName(const std::string& name)
{
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos
        && name.find('\n') == std::string::npos && name.find('\0') == std::string::npos;
}

bool contains(const std::vector<std::string>& names, const std::string& name)
{
    for (const auto& n : names)
        if (n == name)
            return true;
    return false;
}

Status moveEntry(const fs::path& from, const fs::path& to, const char* what)
{
    if (::rename(from.c_str(), to.c_str()) != 0)
        return makeError("cannot move " + std::string(what) + " " + from.string() + " to " + to.string() + ": "
                         + std::strerror(errno));
    return Status::success();
}

} // namespace

bool isJournalBookkeeping(const std::string& name)
{
    // The journal, the replaced files, and a journal begun under replaceFileAtomically()'s temporary name.
    return name == kJournal || name == kReplaced || name.rfind(std::string(".") + kJournal + ".", 0) == 0;
}

Status commitJournal(const std::string& staging, const PublishJournal& journal)
{
    std::string text = std::string(kHeader) + "\n";
    for (const auto& name : journal.names) {
        if (!isPlainName(name))
            return makeError("internal: cannot publish an entry named '" + name + "'");
        text += (contains(journal.keystones, name) ? "k " : "f ") + name + "\n";
    }
    const fs::path replaced = fs::path(staging) / kReplaced;
    if (::mkdir(replaced.c_str(), 0700) != 0 && errno != EEXIST)
        return makeError(replaced.string() + ": cannot be created: " + std::strerror(errno));
    // Written under a fresh name and renamed: a kill while it is written leaves no journal, only a file that
    // clearJournal() removes.
    return replaceFileAtomically((fs::path(staging) / kJournal).string(), text);
}

std::optional<PublishJournal> readJournal(const std::string& staging)
{
    auto text = readTextFile((fs::path(staging) / kJournal).string());
    if (!text)
        return std::nullopt;
    std::istringstream in(*text);
    std::string line;
    if (!std::getline(in, line) || line != kHeader)
        return std::nullopt;
    PublishJournal journal;
    while (std::getline(in, line)) {
        if (line.size() < 3 || (line[0] != 'k' && line[0] != 'f') || line[1] != ' ' || !isPlainName(line.substr(2)))
            return std::nullopt; // not a journal this program wrote: touch nothing
        journal.names.push_back(line.substr(2));
        if (line[0] == 'k')
            journal.keystones.push_back(line.substr(2));
    }
    return journal;
}

Status applyJournal(const std::string& staging, const std::string& target, const PublishJournal& journal)
{
    const fs::path from(staging), to(target), replaced = fs::path(staging) / kReplaced;
    auto moveAside = [&](const std::string& name) -> Status {
        if (!pathExists(from / name) || !pathExists(to / name))
            return Status::success(); // already moved in, or nothing to replace
        return moveEntry(to / name, replaced / name, "the old");
    };
    // The old keystones go first: from here on the target no longer looks like a complete (old) model.
    for (const auto& name : journal.keystones)
        TESSERA_TRY(moveAside(name));
    for (const auto& name : journal.names) {
        if (!pathExists(from / name))
            continue; // moved in before
        TESSERA_TRY(moveAside(name));
        TESSERA_TRY(moveEntry(from / name, to / name, "the new"));
    }
    return syncFolder(target);
}

bool undoJournal(const std::string& staging, const std::string& target, const PublishJournal& journal)
{
    const fs::path from(staging), to(target), replaced = fs::path(staging) / kReplaced;
    bool restored = true;
    for (auto it = journal.names.rbegin(); it != journal.names.rend(); ++it) {
        if (!pathExists(from / *it) && pathExists(to / *it))
            restored &= ::rename((to / *it).c_str(), (from / *it).c_str()) == 0;
        if (pathExists(replaced / *it) && !pathExists(to / *it))
            restored &= ::rename((replaced / *it).c_str(), (to / *it).c_str()) == 0;
    }
    (void)syncFolder(target);
    return restored;
}

Status clearJournal(const std::string& staging)
{
    const fs::path dir(staging);
    std::error_code ec;
    fs::remove_all(dir / kReplaced, ec);
    if (ec)
        return makeError((dir / kReplaced).string() + ": cannot be removed: " + ec.message());
    // Journals begun and never committed (replaceFileAtomically()'s temporary names).
    for (const auto& entry : folderEntries(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(std::string(".") + kJournal + ".", 0) == 0)
            ::unlink(entry.path().c_str());
    }
    if (::unlink((dir / kJournal).c_str()) != 0 && errno != ENOENT)
        return makeError((dir / kJournal).string() + ": cannot be removed: " + std::strerror(errno));
    return syncFolder(staging);
}

} // namespace tessera
