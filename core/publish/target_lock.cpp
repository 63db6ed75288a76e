// SPDX-License-Identifier: GPL-3.0-or-later
#include "publish/target_lock.h"

#include "command_name.h"
#include "io/durable_file.h"
#include "io/path_kinds.h"
#include "io/printable.h"
#include "io/text_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace tessera {

namespace {

constexpr const char* kHeader = "tessera-lock 1";
constexpr auto kRenewEvery = std::chrono::seconds(20);
constexpr long kRunVoidAfterSeconds = 120;
constexpr long kSetGraceSeconds = 60;

std::string hostName()
{
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0)
        return "unknown";
    return buf;
}

std::string bootId()
{
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return id;
}

/// The start time of process `pid` in clock ticks after boot (field 22 of /proc/<pid>/stat); 0 when unknown. With
/// the pid it names one process for the whole life of a boot: a pid reused later has another start time.
long long processStart(long long pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')'); // the command name may hold spaces and parentheses
    if (close == std::string::npos)
        return 0;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i)
        if (i == 22)
            return std::atoll(field.c_str());
    return 0;
}

struct LockRecord {
    LockHolder holder;
    bool published = false; ///< a set's record that it published the target: holds nothing
    std::string what;
    std::string boot;
    long long start = 0;
};

std::optional<LockRecord> parseLock(const std::string& text, const std::string& path)
{
    std::istringstream in(text);
    std::string line;
    if (!std::getline(in, line) || line != kHeader)
        return std::nullopt;
    LockRecord r;
    r.holder.path = path;
    while (std::getline(in, line)) {
        const auto space = line.find(' ');
        const std::string key = line.substr(0, space);
        const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
        if (key == "kind") {
            r.holder.set = value == "set" || value == "published";
            r.published = value == "published";
        }
        else if (key == "set")
            r.holder.setId = value;
        else if (key == "what")
            r.what = value;
        else if (key == "host")
            r.holder.host = value;
        else if (key == "boot")
            r.boot = value;
        else if (key == "pid")
            r.holder.pid = std::atoll(value.c_str());
        else if (key == "start")
            r.start = std::atoll(value.c_str());
        else if (key == "since")
            r.holder.since = std::atoll(value.c_str());
    }
    return r;
}

std::string lockText(const char* kind, const std::string& what, const std::string& setId)
{
    std::ostringstream out;
    out << kHeader << "\n"
        << "kind " << kind << "\n"
        << "what " << what << "\n"
        << "set " << setId << "\n"
        << "host " << hostName() << "\n"
        << "boot " << bootId() << "\n"
        << "pid " << ::getpid() << "\n"
        << "start " << processStart(::getpid()) << "\n"
        << "since " << static_cast<long long>(std::time(nullptr)) << "\n";
    return out.str();
}

/// The lock's places: beside the target (preferred), inside it.
struct LockPlaces {
    fs::path beside, inside;
};

LockPlaces placesOf(const std::string& target)
{
    const fs::path t = normalTarget(target);
    return { t.parent_path() / ("." + t.filename().string() + ".tessera-lock"), t / ".tessera-lock" };
}

/// Seconds between the lock file's last renewal and now, both on the file system's clock (a probe file written
/// beside it), so that a host whose clock is off does not misjudge another host's lock. -1 when unknown.
long long secondsSinceRenewed(const fs::path& lock)
{
    struct stat lockStat {};
    if (::lstat(lock.c_str(), &lockStat) != 0)
        return -1;
    const std::string probe = uniqueSiblingName(lock.string(), "probe");
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return static_cast<long long>(std::time(nullptr)) - lockStat.st_mtim.tv_sec;
    struct stat probeStat {};
    const bool ok = ::fstat(fd, &probeStat) == 0;
    ::close(fd);
    ::unlink(probe.c_str());
    return ok ? probeStat.st_mtim.tv_sec - lockStat.st_mtim.tv_sec : -1;
}

bool processAliveHere(const LockRecord& r)
{
    if (r.holder.host != hostName() || (!r.boot.empty() && r.boot != bootId()))
        return false;
    if (r.holder.pid <= 0 || r.holder.pid > 0x7fffffff)
        return false;
    if (::kill(static_cast<pid_t>(r.holder.pid), 0) != 0 && errno == ESRCH)
        return false;
    return r.start == 0 || processStart(r.holder.pid) == r.start;
}

/// Whether the lock at `path` (read as `r`) still holds, by the rule in target_lock.h.
bool isLive(const LockRecord& r, const fs::path& path, const SetExists& setExists)
{
    if (r.published)
        return false;
    const bool here = r.holder.host == hostName() && (r.boot.empty() || r.boot == bootId());
    if (r.holder.set) {
        if (setExists && setExists(r.holder.setId))
            return true;
        if (here && !processAliveHere(r))
            return false;
        const long long age = secondsSinceRenewed(path);
        return age >= 0 && age < kSetGraceSeconds;
    }
    if (here)
        return processAliveHere(r);
    const long long age = secondsSinceRenewed(path);
    return age < 0 || age < kRunVoidAfterSeconds;
}

/// The lock file at `path`: its record, or nullopt when there is none. A file there that is not a lock (or cannot
/// be read) counts as held by an unknown run, so that nothing is broken that is not understood.
std::optional<LockRecord> readLock(const fs::path& path, bool& present)
{
    present = pathExists(path);
    if (!present)
        return std::nullopt;
    auto text = readTextFile(path.string(), 4096);
    return text ? parseLock(*text, path.string()) : std::nullopt;
}

Error refusal(const LockHolder& holder, const std::string& target)
{
    return makeError(target + " is being written by " + holder.describe() + " (lock " + holder.path + "); "
                     + (holder.set ? "finish that job (run its missing parts) or discard it with `" + commandName()
                                     + " merge --status " + target + " --discard`, then run this again"
                                   : "wait for it to finish, or choose another target folder"));
}

} // namespace

std::string LockHolder::describe() const
{
    char when[32] = "an unknown time";
    const std::time_t t = static_cast<std::time_t>(since);
    std::tm tm {};
    if (since > 0 && ::localtime_r(&t, &tm))
        std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    // Read from a file another host may have written: shown escaped.
    if (set)
        return "a job split into parts (set " + printableText(setId) + ", begun by pid " + std::to_string(pid)
            + " on " + printableText(host) + " at " + when + ")";
    return "another run (pid " + std::to_string(pid) + " on " + printableText(host) + ", since " + when + ")";
}

struct TargetLock::Held {
    fs::path path;
    int fd = -1;
    dev_t dev = 0;
    ino_t ino = 0;
    bool set = false;
    std::string setId;
    std::vector<fs::path> createdParents; ///< innermost last
    std::mutex mutex;
    std::condition_variable wake;
    bool stopping = false;
    std::thread renewer;

    ~Held()
    {
        {
            std::lock_guard<std::mutex> lock(mutex);
            stopping = true;
        }
        wake.notify_all();
        if (renewer.joinable())
            renewer.join();
        if (fd >= 0)
            ::close(fd);
    }

    void renewInBackground()
    {
        renewer = std::thread([this] {
            std::unique_lock<std::mutex> lock(mutex);
            while (!wake.wait_for(lock, kRenewEvery, [this] { return stopping; }))
                (void)::futimens(fd, nullptr);
        });
    }

    bool stillOurs() const
    {
        struct stat st {};
        return ::lstat(path.c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino;
    }
};

namespace {

/// Moves a void lock out of the way, making sure it is the one judged void (not one a third run just made).
bool retireVoidLock(const fs::path& path, const struct stat& judged)
{
    const std::string aside = uniqueSiblingName(path.string(), "tessera-void");
    if (::rename(path.c_str(), aside.c_str()) != 0)
        return errno == ENOENT;
    struct stat st {};
    if (::lstat(aside.c_str(), &st) == 0 && (st.st_dev != judged.st_dev || st.st_ino != judged.st_ino)) {
        // Not the one judged: put it back where it was (unless yet another lock is there by now).
        if (::link(aside.c_str(), path.c_str()) == 0)
            ::unlink(aside.c_str());
        return false;
    }
    ::unlink(aside.c_str());
    return true;
}

} // namespace

TargetLock::TargetLock() = default;
TargetLock::TargetLock(TargetLock&&) noexcept = default;
TargetLock& TargetLock::operator=(TargetLock&&) noexcept = default;
TargetLock::~TargetLock()
{
    if (m_held && !m_held->set)
        release();
}

std::optional<LockHolder> TargetLock::holder(const std::string& target, const SetExists& setExists)
{
    const auto places = placesOf(target);
    for (const auto& path : { places.beside, places.inside }) {
        bool present = false;
        auto record = readLock(path, present);
        if (!present)
            continue;
        if (!record) {
            LockHolder unknown;
            unknown.path = path.string();
            unknown.host = "?";
            return unknown;
        }
        if (isLive(*record, path, setExists))
            return record->holder;
    }
    return std::nullopt;
}

namespace {

/// Removes the temporary files a run killed while taking, judging or publishing a lock left beside it
/// ("..<name>.tessera-lock.new-PID-…", ".probe-", ".tessera-void-", ".tessera-new-"): uniqueSiblingName()'s names
/// of the lock's two places. Each lives for a moment in a live run, so one older than ten minutes is a leftover.
/// Only this user's plain files: nothing else beside the target is touched.
void removeLockLeftovers(const LockPlaces& places)
{
    const auto now = fs::file_time_type::clock::now();
    for (const auto& lock : { places.beside, places.inside }) {
        const std::string prefix = "." + lock.filename().string() + ".";
        std::error_code ec;
        for (const auto& entry : folderEntries(lock.parent_path(), ec)) {
            const std::string name = entry.path().filename().string();
            if (name.rfind(prefix, 0) != 0)
                continue;
            const std::string tag = name.substr(prefix.size());
            const bool ours = tag.rfind("new-", 0) == 0 || tag.rfind("probe-", 0) == 0
                || tag.rfind("tessera-void-", 0) == 0 || tag.rfind("tessera-new-", 0) == 0;
            struct stat st {};
            if (!ours || ::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid())
                continue;
            std::error_code timeError;
            const auto modified = fs::last_write_time(entry.path(), timeError);
            if (!timeError && now - modified > std::chrono::minutes(10))
                ::unlink(entry.path().c_str());
        }
    }
}

/// Creates the missing folders above the target (the lock sits beside it), innermost last.
Status createParents(const fs::path& parent, std::vector<fs::path>& created)
{
    std::vector<fs::path> missing;
    for (fs::path p = parent; !p.empty() && !pathExists(p) && p != p.parent_path(); p = p.parent_path())
        missing.push_back(p);
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
        if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST)
            return makeError("cannot create folder " + it->string() + ": " + std::strerror(errno));
        created.push_back(*it);
    }
    return Status::success();
}

/// Where a new lock goes: beside the target when its folder can be written, else inside the target.
fs::path placeForNewLock(const std::string& target)
{
    const auto places = placesOf(target);
    const fs::path parent = places.beside.parent_path();
    if (isFolder(parent) && ::access(parent.c_str(), W_OK | X_OK) != 0 && isFolder(normalTarget(target)))
        return places.inside;
    return places.beside;
}

Result<std::unique_ptr<TargetLock::Held>> takeLock(const std::string& target, bool set, const std::string& what,
                                                   const std::string& setId, const SetExists& setExists)
{
    auto held = std::make_unique<TargetLock::Held>();
    held->set = set;
    held->setId = setId;
    const auto places = placesOf(target);
    removeLockLeftovers(places);
    for (int attempt = 0; attempt < 8; ++attempt) {
        // A live lock in either place refuses (or, for a part of the same set, is joined); a void one is retired.
        bool retired = false;
        for (const auto& path : { places.beside, places.inside }) {
            struct stat st {};
            if (::lstat(path.c_str(), &st) != 0)
                continue;
            bool present = false;
            auto record = readLock(path, present);
            if (record && set && record->holder.set && record->holder.setId == setId) {
                held->path = path; // another part of this set holds it: work under it
                return held;
            }
            if (!record || isLive(*record, path, setExists)) {
                LockHolder unknown;
                unknown.path = path.string();
                unknown.host = "an unknown host";
                return refusal(record ? record->holder : unknown, normalTarget(target).string());
            }
            if (!retireVoidLock(path, st))
                break; // it changed under us: look again
            retired = true;
        }
        if (retired)
            continue;
        const fs::path path = placeForNewLock(target);
        if (path == places.beside)
            TESSERA_TRY(createParents(path.parent_path(), held->createdParents));
        // Written whole under a fresh name, then link()ed into place: atomic where O_EXCL is not (old NFS), and no
        // other run ever reads a lock half written.
        const std::string fresh = uniqueSiblingName(path.string(), "new");
        const int fd = ::open(fresh.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        const std::string text = lockText(set ? "set" : "run", what, setId);
        if (fd < 0 || !writeAllAt(fd, reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), 0, fresh)
            || ::fsync(fd) != 0) {
            const std::string reason = std::strerror(errno);
            if (fd >= 0)
                ::close(fd);
            ::unlink(fresh.c_str());
            for (auto it = held->createdParents.rbegin(); it != held->createdParents.rend(); ++it)
                ::rmdir(it->c_str());
            return makeError(path.string() + ": cannot create the target's lock: " + reason);
        }
        const bool linked = ::link(fresh.c_str(), path.c_str()) == 0;
        const int linkError = errno;
        ::unlink(fresh.c_str());
        if (!linked) {
            ::close(fd);
            if (linkError == EEXIST)
                continue; // another run was quicker: judge its lock
            return makeError(path.string() + ": cannot create the target's lock: " + std::strerror(linkError));
        }
        held->fd = fd;
        held->path = path;
        struct stat st {};
        (void)::fstat(fd, &st);
        held->dev = st.st_dev;
        held->ino = st.st_ino;
        (void)syncFolder(path.parent_path().string());
        if (set) {
            ::close(held->fd); // a set's lock outlives this process: nothing to renew
            held->fd = -1;
        }
        return held;
    }
    return makeError(places.beside.string() + ": the target's lock keeps changing; another run is starting at the "
                                              "same moment. Try again");
}

} // namespace

Result<TargetLock> TargetLock::forRun(const std::string& target, const std::string& what, const SetExists& setExists)
{
    auto held = takeLock(target, false, what, "", setExists);
    TESSERA_TRY(held);
    TargetLock lock;
    lock.m_held = std::move(*held);
    lock.m_held->renewInBackground();
    return lock;
}

Result<TargetLock> TargetLock::forSet(const std::string& target, const std::string& id, const SetExists& setExists)
{
    auto held = takeLock(target, true, "parts", id, setExists);
    TESSERA_TRY(held);
    TargetLock lock;
    lock.m_held = std::move(*held);
    return lock;
}

void TargetLock::removeSetLock(const std::string& target, const std::string& id)
{
    const auto places = placesOf(target);
    for (const auto& path : { places.beside, places.inside }) {
        bool present = false;
        auto record = readLock(path, present);
        if (record && record->holder.set && record->holder.setId == id && ::unlink(path.c_str()) == 0)
            (void)syncFolder(path.parent_path().string());
    }
}

Status TargetLock::checkFree(const std::string& target, const SetExists& setExists)
{
    const auto held = holder(target, setExists);
    if (held)
        return refusal(*held, normalTarget(target).string());
    return Status::success();
}

bool TargetLock::publishedBy(const std::string& target, const std::string& id)
{
    const auto places = placesOf(target);
    for (const auto& path : { places.beside, places.inside }) {
        bool present = false;
        auto record = readLock(path, present);
        if (record && record->published && record->holder.setId == id)
            return true;
    }
    return false;
}

Status TargetLock::markPublished()
{
    if (!m_held || !m_held->set)
        return makeError("internal: only a set's lock records a publish");
    TESSERA_TRY(replaceFileAtomically(m_held->path.string(), lockText("published", "parts", m_held->setId)));
    m_held.reset();
    return Status::success();
}

void TargetLock::release()
{
    if (!m_held)
        return;
    bool ours = false;
    if (m_held->set) {
        bool present = false;
        auto record = readLock(m_held->path, present);
        ours = record && record->holder.set && record->holder.setId == m_held->setId;
    } else {
        ours = m_held->stillOurs();
    }
    if (ours && ::unlink(m_held->path.c_str()) == 0)
        (void)syncFolder(m_held->path.parent_path().string());
    for (auto it = m_held->createdParents.rbegin(); it != m_held->createdParents.rend(); ++it)
        ::rmdir(it->c_str()); // only while empty: a published target has moved in meanwhile
    m_held.reset();
}

} // namespace tessera
