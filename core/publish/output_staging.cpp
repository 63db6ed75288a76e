// SPDX-License-Identifier: GPL-3.0-or-later
#include "publish/output_staging.h"

#include "io/durable_file.h"
#include "io/path_kinds.h"
#include "publish/publish_journal.h"
#include "publish/staged_files.h"
#include "text_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;

namespace tessera {

namespace {

// Name parts of the temporary folders. "new" marks a folder between its creation and its lock (never holds
// data); "partial" a locked folder being written. Beside the target they follow ".<target name>".
constexpr const char* kTag = ".tessera-";
constexpr const char* kNew = "new-";
constexpr const char* kPartial = "partial-";

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

/// The process's umask, read without changing it (umask() would, for every thread at once); 022 when unknown.
mode_t currentUmask()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("Umask:", 0) == 0)
            return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
    return 022;
}

/// Completes the publish a dead run had decided (its journal committed), then forgets the journal. True when there
/// was one.
bool completeDecidedPublish(const fs::path& temp, const fs::path& target)
{
    auto journal = readJournal(temp.string());
    if (!journal)
        return false;
    (void)applyJournal(temp.string(), target.string(), *journal);
    (void)clearJournal(temp.string());
    return true;
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
            const bool completed = completeDecidedPublish(dir, t);
            fs::remove_all(dir, ec);
            ::close(lock);
            if (!ec)
                notes.push_back("removed " + dir.string() + ", the temporary folder of an interrupted run"
                                + (completed ? ", after completing the publish into " + t.string() + " it had begun"
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
        // Only this user may put anything in it while it is written; it gets the usual mode when it is published.
        if (::mkdir(fresh.c_str(), 0700) != 0) {
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
    if (auto journal = readJournal(dir.string())) {
        // Applied again, and kept: the folder's owner removes it once it has recorded that the publish is done.
        TESSERA_TRY(applyJournal(dir.string(), t.string(), *journal));
        staging.m_completedEarlier = true;
        return staging;
    }
    TESSERA_TRY(clearJournal(dir.string()));
    return staging;
}

OutputStaging::OutputStaging(OutputStaging&& other) noexcept
    : m_target(std::move(other.m_target)),
      m_temp(std::move(other.m_temp)),
      m_createdParents(std::move(other.m_createdParents)),
      m_lock(other.m_lock),
      m_active(other.m_active),
      m_keep(other.m_keep),
      m_completedEarlier(other.m_completedEarlier)
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

Status OutputStaging::publish(const std::vector<std::string>& files, const std::vector<std::string>& keystones)
{
    if (!m_active)
        return makeError("internal: output already published or discarded");
    auto names = checkStagedFiles(m_temp, files);
    TESSERA_TRY(names);
    TESSERA_TRY(syncFolder(m_temp));
    const fs::path target(m_target);
    const bool beside = fs::path(m_temp).parent_path() != target;
    if (beside && !pathExists(target)) {
        // One rename makes the whole folder appear at once, with the mode a new folder gets.
        if (m_lock >= 0)
            (void)::fchmod(m_lock, 0777 & ~currentUmask());
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
    TESSERA_TRY(publishInto(*names, keystones));
    m_createdParents.clear(); // they now hold the target
    if (m_keep) {
        // Adopted: the folder, with its journal, stays until its owner has recorded that the publish is done (a
        // kill before that leaves a journal that says so).
        m_active = false;
        discard();
        return Status::success();
    }
    TESSERA_TRY(clearJournal(m_temp));
    discard();
    return Status::success();
}

Status OutputStaging::publishInto(const std::vector<std::string>& names, const std::vector<std::string>& keystones)
{
    // Everything else first, then the keystones in their order.
    PublishJournal journal;
    for (const auto& name : names)
        if (std::find(keystones.begin(), keystones.end(), name) == keystones.end())
            journal.names.push_back(name);
    for (const auto& name : keystones)
        if (std::find(names.begin(), names.end(), name) != names.end()) {
            journal.names.push_back(name);
            journal.keystones.push_back(name);
        }
    TESSERA_TRY(commitJournal(m_temp, journal));
    Status moved = applyJournal(m_temp, m_target, journal);
    if (!moved) {
        if (undoJournal(m_temp, m_target, journal)) {
            (void)clearJournal(m_temp);
            return moved;
        }
        // The old files could not all be put back: the journal stays, and the next run completes the publish.
        ::close(m_lock);
        m_lock = -1;
        m_active = false;
        return makeError(moved.error().message + "; the publish is recorded in " + m_temp + " and the next run into "
                         + m_target + " completes it");
    }
    return Status::success();
}

} // namespace tessera
