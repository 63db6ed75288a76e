// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/output_staging.h"

#include "io/durable_file.h"
#include "io/path_kinds.h"
#include "io/text_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>

namespace fs = std::filesystem;

namespace tessera {

namespace {

// Name parts of the temporary folders. "new" marks a folder between its creation and its lock (never holds
// data); "partial" a locked folder being written. Beside the target they follow ".<target name>".
constexpr const char* kTag = ".tessera-";
constexpr const char* kNew = "new-";
constexpr const char* kPartial = "partial-";
constexpr const char* kJournal = ".publish-journal";
constexpr const char* kReplaced = ".replaced";

bool startsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string errnoText() { return std::strerror(errno); }

std::string randomSuffix()
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::random_device rd;
    std::mt19937 gen(rd());
    std::string s(6, 'x');
    for (auto& c : s)
        c = chars[gen() % (sizeof(chars) - 1)];
    return s;
}

/// An exclusive lock on a folder, held by an open descriptor: the kernel drops it when the process dies, which
/// is how a later run tells a dead run's folder from a live one. -1 when the folder is locked or not a folder.
int lockFolder(const fs::path& dir)
{
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

/// The journal of a publish: one line per file name, "1 name" when the target already held a file of that name.
struct JournalLine {
    bool existed = false;
    std::string name;
};

std::string journalText(const std::vector<JournalLine>& lines)
{
    std::string text;
    for (const auto& line : lines)
        text += std::string(line.existed ? "1 " : "0 ") + line.name + "\n";
    return text;
}

std::vector<JournalLine> parseJournal(const std::string& text)
{
    std::vector<JournalLine> lines;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        // Names come from our own output (no '/', never "." or ".."); anything else is not ours to touch.
        if (line.size() < 3 || (line[0] != '0' && line[0] != '1') || line[1] != ' ')
            continue;
        const std::string name = line.substr(2);
        if (name.find('/') != std::string::npos || name == "." || name == "..")
            continue;
        lines.push_back({ line[0] == '1', name });
    }
    return lines;
}

/// Undoes the moves of a publish that was killed halfway, from the journal in `temp`: replaced files go back,
/// new files that had no predecessor are removed. Returns true when there was something to undo.
bool rollBackInterruptedPublish(const fs::path& temp, const fs::path& target)
{
    auto text = readTextFile((temp / kJournal).string());
    if (!text)
        return false;
    for (const auto& line : parseJournal(*text)) {
        const fs::path backup = temp / kReplaced / line.name;
        if (pathExists(backup))
            ::rename(backup.c_str(), (target / line.name).c_str());
        else if (!line.existed && !pathExists(temp / line.name))
            ::unlink((target / line.name).c_str());
    }
    (void)syncFolder(target.string());
    return true;
}

/// Undoes the moves of a publish of `temp` that was interrupted, keeping the new files: those already moved into
/// the target go back into `temp`, the files they replaced back into the target. The folder can then be published
/// again.
Status rollBackKeepingNewFiles(const fs::path& temp, const fs::path& target)
{
    auto text = readTextFile((temp / kJournal).string());
    if (!text)
        return Status::success();
    auto moveBack = [&](const std::string& name) -> Status {
        if (pathExists(target / name) && !pathExists(temp / name)
            && ::rename((target / name).c_str(), (temp / name).c_str()) != 0)
            return makeError("cannot move " + (target / name).string() + " back into " + temp.string() + ": "
                             + errnoText());
        return Status::success();
    };
    for (const auto& line : parseJournal(*text)) {
        const fs::path backup = temp / kReplaced / line.name;
        if (pathExists(backup)) {
            TESSERA_TRY(moveBack(line.name));
            if (::rename(backup.c_str(), (target / line.name).c_str()) != 0)
                return makeError("cannot restore " + (target / line.name).string() + ": " + errnoText());
        } else if (!line.existed) {
            TESSERA_TRY(moveBack(line.name));
        }
    }
    TESSERA_TRY(syncFolder(target.string()));
    ::rmdir((temp / kReplaced).c_str());
    ::unlink((temp / kJournal).c_str());
    return syncFolder(temp.string());
}

/// Where the temporary folders for `target` live, and the name prefix they carry there.
struct StagingPlace {
    fs::path folder;
    std::string prefix;
};

std::vector<StagingPlace> stagingPlaces(const fs::path& target)
{
    std::vector<StagingPlace> places;
    places.push_back({ target.parent_path(), "." + target.filename().string() + kTag });
    if (isFolder(target))
        places.push_back({ target, kTag });
    return places;
}

/// True for "<digits>-<random>" after "new-" or "partial-", and for the six-character random suffix of
/// folders written by Tessera before they were locked (beside the target only).
bool isStagingSuffix(const std::string& rest, bool allowLegacy)
{
    std::string tail;
    if (startsWith(rest, kNew))
        tail = rest.substr(std::strlen(kNew));
    else if (startsWith(rest, kPartial))
        tail = rest.substr(std::strlen(kPartial));
    else
        return allowLegacy && rest.size() == 6
            && std::all_of(rest.begin(), rest.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
    const auto dash = tail.find('-');
    return dash != std::string::npos && dash > 0
        && std::all_of(tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(dash),
                       [](char c) { return c >= '0' && c <= '9'; });
}

} // namespace

Status OutputStaging::checkTarget(const std::string& target, const std::vector<std::string>& finalNames)
{
    if (target.empty())
        return makeError("no target folder given");
    const fs::path t = normalTarget(target);
    struct stat st {};
    if (::stat(t.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return makeError(t.string() + " exists and is not a folder; choose another target folder");
        if (::access(t.c_str(), W_OK | X_OK) != 0)
            return makeError(t.string() + ": cannot write into this folder (" + errnoText()
                             + "); choose another target folder");
        for (const auto& name : finalNames)
            if (isRealFolder(t / name))
                return makeError((t / name).string() + " is a folder, but the merged model has a file of that name; "
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
        return makeError(ancestor.string() + ": cannot create " + t.string() + " there (" + errnoText()
                         + "); choose another target folder");
    return Status::success();
}

std::vector<std::string> OutputStaging::removeStale(const std::string& target)
{
    std::vector<std::string> notes;
    const fs::path t = normalTarget(target);
    for (const auto& place : stagingPlaces(t)) {
        std::error_code ec;
        std::vector<fs::path> stale;
        for (const auto& entry : folderEntries(place.folder, ec)) {
            const std::string name = entry.path().filename().string();
            if (startsWith(name, place.prefix)
                && isStagingSuffix(name.substr(place.prefix.size()), place.folder != t))
                stale.push_back(entry.path());
        }
        for (const auto& dir : stale) {
            const int lock = lockFolder(dir);
            if (lock < 0)
                continue; // a live run's folder (or not a folder at all): not ours to remove
            const bool restored = rollBackInterruptedPublish(dir, t);
            fs::remove_all(dir, ec);
            ::close(lock);
            if (!ec)
                notes.push_back("removed " + dir.string() + ", the temporary folder of an interrupted run"
                                + (restored ? "; the files in " + t.string() + " it had begun to replace were restored"
                                            : ""));
        }
    }
    return notes;
}

Result<OutputStaging> OutputStaging::create(const std::string& target)
{
    OutputStaging staging;
    const fs::path t = normalTarget(target);
    if (pathExists(t) && !isFolder(t))
        return makeError(t.string() + ": exists and is not a folder");
    const bool inside = isFolder(t);
    const fs::path base = inside ? t : t.parent_path();
    const std::string prefix = inside ? std::string(kTag) : "." + t.filename().string() + kTag;
    // Create missing parents, remembering them so a failure can remove them again.
    std::vector<fs::path> missing;
    for (fs::path p = base; !p.empty() && !pathExists(p); p = p.parent_path()) {
        missing.push_back(p);
        if (p == p.parent_path())
            break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
        if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST) {
            const std::string reason = errnoText();
            staging.discard();
            return makeError("cannot create folder " + it->string() + ": " + reason);
        }
        staging.m_createdParents.push_back(it->string());
    }
    // Created under a "new" name and renamed once locked, so a concurrent removeStale() never takes a folder
    // in the instant between its creation and its lock for a dead run's.
    const std::string pid = std::to_string(::getpid());
    std::string reason = "name collision";
    for (int attempt = 0; attempt < 16; ++attempt) {
        const std::string suffix = pid + "-" + randomSuffix();
        const fs::path fresh = base / (prefix + kNew + suffix);
        const fs::path temp = base / (prefix + kPartial + suffix);
        if (::mkdir(fresh.c_str(), 0777) != 0) {
            reason = errnoText();
            if (errno == EEXIST)
                continue;
            break;
        }
        const int lock = lockFolder(fresh);
        if (lock >= 0 && ::rename(fresh.c_str(), temp.c_str()) == 0) {
            staging.m_target = t.string();
            staging.m_temp = temp.string();
            staging.m_lock = lock;
            staging.m_active = true;
            return staging;
        }
        reason = errnoText();
        if (lock >= 0)
            ::close(lock);
        ::rmdir(fresh.c_str());
    }
    staging.discard();
    return makeError("cannot create a temporary folder in " + base.string() + ": " + reason);
}

Result<OutputStaging> OutputStaging::adopt(const std::string& target, const std::string& folder)
{
    OutputStaging staging;
    const fs::path t = normalTarget(target);
    const fs::path dir = normalTarget(folder);
    const int lock = lockFolder(dir);
    if (lock < 0)
        return makeError(dir.string() + (isRealFolder(dir) ? " is being published by another process"
                                                           : " is missing or not a folder"));
    staging.m_lock = lock;
    staging.m_target = t.string();
    staging.m_temp = dir.string();
    staging.m_keep = true;
    staging.m_active = true;
    TESSERA_TRY(rollBackKeepingNewFiles(dir, t));
    if (pathExists(dir / kReplaced) || pathExists(dir / kJournal))
        return makeError(dir.string() + " holds files of an interrupted publish that could not be put back ("
                         + std::string(kReplaced) + ", " + kJournal + ")");
    return staging;
}

OutputStaging::OutputStaging(OutputStaging&& other) noexcept
    : m_target(std::move(other.m_target)),
      m_temp(std::move(other.m_temp)),
      m_createdParents(std::move(other.m_createdParents)),
      m_lock(other.m_lock),
      m_active(other.m_active),
      m_keep(other.m_keep)
{
    other.m_active = false;
    other.m_lock = -1;
    other.m_createdParents.clear();
}

OutputStaging::~OutputStaging() { discard(); }

void OutputStaging::discard()
{
    std::error_code ec;
    if (m_active && !m_keep && !m_temp.empty())
        fs::remove_all(m_temp, ec);
    m_active = false;
    if (m_lock >= 0)
        ::close(m_lock);
    m_lock = -1;
    for (auto it = m_createdParents.rbegin(); it != m_createdParents.rend(); ++it)
        ::rmdir(it->c_str()); // only succeeds while empty: never removes anything someone else put there
    m_createdParents.clear();
}

Status OutputStaging::publish(const std::vector<std::string>& keystones)
{
    if (!m_active)
        return makeError("internal: output already published or discarded");
    TESSERA_TRY(syncFolder(m_temp));
    const fs::path target(m_target);
    const bool beside = fs::path(m_temp).parent_path() != target;
    if (beside && !pathExists(target)) {
        // One rename makes the whole folder appear at once.
        if (::rename(m_temp.c_str(), m_target.c_str()) == 0) {
            TESSERA_TRY(syncFolder(target.parent_path().string()));
            if (!m_createdParents.empty())
                (void)syncFolder(fs::path(m_createdParents.front()).parent_path().string());
            m_active = false;
            m_createdParents.clear();
            discard();
            return Status::success();
        }
        if (errno != EEXIST && errno != ENOTEMPTY)
            return makeError("cannot move " + m_temp + " to " + m_target + ": " + errnoText());
        // Someone created the target meanwhile: move the files into it instead.
    }
    TESSERA_TRY(publishInto(keystones));
    // What is left in the temporary folder (the replaced files) goes; the created parents now hold the target.
    m_createdParents.clear();
    m_keep = false;
    discard();
    return Status::success();
}

Status OutputStaging::publishInto(const std::vector<std::string>& keystones)
{
    const fs::path temp(m_temp);
    const fs::path target(m_target);
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : folderEntries(temp, ec)) {
        // Everything written is published, hidden names too (a DCP folder's .metadata); only the staging's
        // own bookkeeping stays behind.
        const std::string name = entry.path().filename().string();
        if (!name.empty() && name != kJournal && name != kReplaced && name.rfind(std::string(kJournal) + ".", 0) != 0)
            names.push_back(name);
    }
    if (ec)
        return makeError(m_temp + ": cannot be listed: " + ec.message());
    // Everything else first, then the keystones in their order.
    std::sort(names.begin(), names.end());
    auto keyRank = [&](const std::string& n) {
        auto it = std::find(keystones.begin(), keystones.end(), n);
        return it == keystones.end() ? -1 : static_cast<int>(it - keystones.begin());
    };
    std::stable_sort(names.begin(), names.end(),
                     [&](const std::string& a, const std::string& b) { return keyRank(a) < keyRank(b); });

    std::vector<JournalLine> journal;
    for (const auto& name : names)
        journal.push_back({ pathExists(target / name), name });
    const fs::path replaced = temp / kReplaced;
    if (::mkdir(replaced.c_str(), 0700) != 0)
        return makeError(replaced.string() + ": cannot be created: " + errnoText());
    // The journal is complete on disk before the first move, so a kill at any later point can be undone.
    const fs::path journalPath = temp / kJournal;
    TESSERA_TRY(writeFileSynced(journalPath.string() + ".new", journalText(journal)));
    if (::rename((journalPath.string() + ".new").c_str(), journalPath.c_str()) != 0)
        return makeError(journalPath.string() + ": cannot be written: " + errnoText());
    TESSERA_TRY(syncFolder(m_temp));

    std::vector<std::string> movedIn;
    std::vector<std::string> movedAside;
    auto undo = [&] {
        bool restored = true;
        for (auto it = movedIn.rbegin(); it != movedIn.rend(); ++it)
            restored &= ::rename((target / *it).c_str(), (temp / *it).c_str()) == 0;
        for (auto it = movedAside.rbegin(); it != movedAside.rend(); ++it)
            restored &= ::rename((replaced / *it).c_str(), (target / *it).c_str()) == 0;
        (void)syncFolder(m_target);
        return restored;
    };
    auto moveAside = [&](const std::string& name) -> Status {
        if (std::find(movedAside.begin(), movedAside.end(), name) != movedAside.end() || !pathExists(target / name))
            return Status::success();
        if (::rename((target / name).c_str(), (replaced / name).c_str()) != 0)
            return makeError("cannot move the old " + (target / name).string() + " aside: " + errnoText());
        movedAside.push_back(name);
        return Status::success();
    };
    Status status;
    // The old keystones go first: from here on the target no longer looks like a complete (old) model.
    for (const auto& name : keystones)
        if (status && std::find(names.begin(), names.end(), name) != names.end())
            status = moveAside(name);
    for (const auto& name : names) {
        if (!status)
            break;
        status = moveAside(name);
        if (status && ::rename((temp / name).c_str(), (target / name).c_str()) != 0)
            status = makeError("cannot move " + name + " into " + m_target + ": " + errnoText());
        if (status)
            movedIn.push_back(name);
    }
    if (status)
        status = syncFolder(m_target);
    if (!status) {
        if (undo())
            return status;
        // The old files could not all be put back: keep them (and the journal) for the next run to restore.
        ::close(m_lock);
        m_lock = -1;
        m_active = false;
        return makeError(status.error().message + "; the files replaced so far are kept in " + m_temp
                         + " and the next merge into " + m_target + " puts them back");
    }
    // Done: without its journal the folder is plain leftovers (the replaced files), removed by discard().
    ::unlink(journalPath.c_str());
    (void)syncFolder(m_temp);
    return Status::success();
}

} // namespace tessera
