// SPDX-License-Identifier: GPL-3.0-or-later
#include "publish/part_set.h"

#include "io/crc32.h"
#include "io/durable_file.h"
#include "io/number_text.h"
#include "io/path_kinds.h"
#include "io/printable.h"
#include "io/text_file.h"
#include "parallel.h"
#include "publish/output_staging.h"
#include "publish/publish_journal.h"
#include "publish/target_lock.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

namespace fs = std::filesystem;

namespace tessera {

namespace {

constexpr const char* kSetTag = "tessera-parts-";
constexpr const char* kRecordFormat = "tessera-merge-part-1";
constexpr const char* kPlanFile = "plan.json";
constexpr const char* kOutFolder = "out";
constexpr const char* kClaim = "finishing";
constexpr std::size_t kIdLength = 16;

std::string errnoText() { return std::strerror(errno); }

std::string dumpJson(const nlohmann::json& j)
{
    // Paths are bytes, not always UTF-8: a target named with a Latin-1 byte must not stop the job.
    return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string hex32(std::uint32_t v)
{
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return buf;
}

std::string hostName()
{
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0)
        return "unknown";
    return buf;
}

/// A pid as another process recorded it: a whole number from 1 to 2^31 - 1 (pid_t's range), else nullopt.
std::optional<long> pidFrom(const std::string& text)
{
    const auto pid = parseWholeNumber(text, 0x7FFFFFFF);
    return pid && *pid > 0 ? std::optional<long>(static_cast<long>(*pid)) : std::nullopt;
}

std::optional<long> pidFrom(const nlohmann::json& value)
{
    return value.is_number_integer() ? pidFrom(value.dump()) : std::nullopt;
}

/// The holder of a claim, from its first line "host pid".
PartProcess claimHolder(const std::string& claimText)
{
    const std::string line = claimText.substr(0, claimText.find('\n'));
    const auto space = line.rfind(' ');
    if (space == std::string::npos)
        return { line, std::nullopt };
    return { line.substr(0, space), pidFrom(line.substr(space + 1)) };
}

/// The places a set for `target` can be: inside the target (when it exists) and beside it.
struct SetPlace {
    fs::path folder;
    std::string prefix;
};

std::vector<SetPlace> setPlaces(const fs::path& target)
{
    std::vector<SetPlace> places;
    if (isFolder(target))
        places.push_back({ target, "." });
    places.push_back({ target.parent_path(), "." + target.filename().string() + "." });
    return places;
}

std::string recordName(unsigned part, unsigned parts)
{
    return "part-" + std::to_string(part) + "-of-" + std::to_string(parts) + ".json";
}

/// What makes a found set folder untrustworthy; empty when it is a real folder of this user no one else can write.
std::string untrusted(const fs::path& dir)
{
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0)
        return "missing";
    if (S_ISLNK(st.st_mode))
        return "a symbolic link";
    if (!S_ISDIR(st.st_mode))
        return "not a folder";
    if (st.st_uid != ::geteuid())
        return "owned by another user (uid " + std::to_string(st.st_uid) + ")";
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return "writable by other users";
    return {};
}

/// Removes a folder (renamed first, so that no part ever writes into a folder being removed).
void retireFolder(const fs::path& set)
{
    const std::string done = uniqueSiblingName(set.string(), "done");
    std::error_code ec;
    if (::rename(set.c_str(), done.c_str()) == 0)
        fs::remove_all(done, ec);
    (void)syncFolder(set.parent_path().string());
}

/// Removes what interrupted parts left beside their sets: folders renamed for removal, and folders begun more
/// than ten minutes ago but never renamed into place (a live part renames its own at once). Only this user's.
void removeLeftovers(const fs::path& target, const std::function<void(const std::string&)>& note)
{
    const auto now = fs::file_time_type::clock::now();
    for (const auto& place : setPlaces(target)) {
        std::error_code ec;
        std::vector<fs::path> leftovers;
        for (const auto& entry : folderEntries(place.folder, ec)) {
            const std::string name = entry.path().filename().string();
            const std::string set = place.prefix + kSetTag;
            // uniqueSiblingName() puts a '.' before the set's own name: "..<set>.done-…", "..<set>.new-…".
            if (name.rfind("." + set, 0) != 0 || !untrusted(entry.path()).empty())
                continue;
            const std::string tail = name.substr(set.size() + 1 + kIdLength);
            std::error_code timeError;
            const auto modified = fs::last_write_time(entry.path(), timeError);
            if (tail.rfind(".done-", 0) == 0
                || (tail.rfind(".new-", 0) == 0 && !timeError && now - modified > std::chrono::minutes(10)))
                leftovers.push_back(entry.path());
        }
        for (const auto& dir : leftovers) {
            fs::remove_all(dir, ec);
            if (!ec)
                note("removed " + dir.string() + ", left by an interrupted part");
        }
    }
}

/// Makes the set's folder whole (plan.json, out/) under a fresh name and renames it into place, so a set's
/// folder is never seen half made. Returns the set, theirs when another part made it first.
Result<fs::path> makeSet(const SetPlace& place, const fs::path& set, const std::string& planJson)
{
    std::error_code ec;
    fs::create_directories(place.folder, ec);
    if (ec)
        return makeError("cannot create folder " + place.folder.string() + ": " + ec.message());
    const fs::path fresh = uniqueSiblingName(set.string(), "new");
    if (::mkdir(fresh.c_str(), 0700) != 0)
        return makeError("cannot create the shared folder " + fresh.string() + ": " + errnoText());
    Status made;
    if (::mkdir((fresh / kOutFolder).c_str(), 0777) != 0)
        made = makeError("cannot create " + (fresh / kOutFolder).string() + ": " + errnoText());
    if (made)
        made = writeFileSynced((fresh / kPlanFile).string(), planJson);
    if (made)
        made = syncFolder(fresh.string());
    if (made && ::rename(fresh.c_str(), set.c_str()) == 0) {
        TESSERA_TRY(syncFolder(place.folder.string()));
        return set;
    }
    const int renameError = errno;
    fs::remove_all(fresh, ec);
    TESSERA_TRY(made);
    if ((renameError == EEXIST || renameError == ENOTEMPTY) && isFolder(set / kOutFolder))
        return set; // another part made it first: use theirs (checked by the caller)
    return makeError("cannot create the shared folder " + set.string() + ": " + std::strerror(renameError));
}

std::optional<PartRecord> parseRecord(const std::string& text, const std::string& id, unsigned part, unsigned parts)
{
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return std::nullopt;
    try {
        if (j.value("format", "") != kRecordFormat || j.value("id", "") != id || j.value("part", -1LL) != part
            || j.value("parts", -1LL) != parts || !j["ranges"].is_array())
            return std::nullopt;
        PartRecord r;
        r.part = part;
        r.bytes = j.value("bytes", std::uint64_t(0));
        r.seconds = j.value("seconds", 0.0);
        // Who wrote it is only shown: a host or pid that is not what it should be does not void the record.
        if (const auto host = j.find("host"); host != j.end() && host->is_string())
            r.process.host = host->get<std::string>();
        if (const auto pid = j.find("pid"); pid != j.end())
            r.process.pid = pidFrom(*pid);
        for (const auto& range : j["ranges"]) {
            RecordedRange rr;
            rr.path = range.at("path").get<std::string>();
            rr.begin = range.at("begin").get<std::uint64_t>();
            rr.end = range.at("end").get<std::uint64_t>();
            const std::string crc = range.at("crc32").get<std::string>();
            char* end = nullptr;
            rr.crc = static_cast<std::uint32_t>(std::strtoul(crc.c_str(), &end, 16));
            if (crc.size() != 8 || *end != '\0' || rr.begin > rr.end)
                return std::nullopt;
            r.ranges.push_back(std::move(rr));
        }
        if (j.contains("extra") && j["extra"].is_object())
            r.extraJson = j["extra"].dump();
        return r;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

bool processGone(const std::string& claimText)
{
    const PartProcess holder = claimHolder(claimText);
    return holder.host == hostName() && holder.pid && ::kill(static_cast<pid_t>(*holder.pid), 0) != 0
        && errno == ESRCH;
}

} // namespace

PublishClaim::PublishClaim() = default;
PublishClaim::PublishClaim(PublishClaim&& o) noexcept : m_fd(o.m_fd), m_previous(o.m_previous)
{
    o.m_fd = o.m_previous = -1;
}
PublishClaim& PublishClaim::operator=(PublishClaim&& o) noexcept
{
    std::swap(m_fd, o.m_fd);
    std::swap(m_previous, o.m_previous);
    return *this;
}
PublishClaim::~PublishClaim()
{
    if (m_fd >= 0)
        ::close(m_fd);
    if (m_previous >= 0)
        ::close(m_previous);
}

std::string PartSet::planJson(const std::string& id, unsigned parts, const std::string& target,
                              std::uint64_t totalBytes, const std::vector<std::uint64_t>& shareBytes,
                              const std::string& sharesJson)
{
    nlohmann::json j { { "format", kRecordFormat }, { "id", id }, { "parts", parts }, { "target", target },
                       { "total_bytes", totalBytes } };
    auto shares = sharesJson.empty() ? nlohmann::json::array() : nlohmann::json::parse(sharesJson, nullptr, false);
    if (sharesJson.empty())
        for (std::size_t k = 0; k < shareBytes.size(); ++k)
            shares.push_back({ { "part", k }, { "bytes", shareBytes[k] } });
    j["shares"] = shares;
    return dumpJson(j);
}

Result<PartSet> PartSet::open(const std::string& targetDir, const std::string& id, unsigned parts,
                              const std::string& planJson, const std::function<Status()>& checkNew,
                              const std::function<void(const std::string&)>& note)
{
    const fs::path target = normalTarget(targetDir);
    removeLeftovers(target, note);
    PartSet set;
    set.m_id = id;
    set.m_parts = parts;
    for (const auto& place : setPlaces(target)) {
        const fs::path dir = place.folder / (place.prefix + kSetTag + id);
        if (!pathExists(dir))
            continue;
        if (const auto problem = untrusted(dir); !problem.empty())
            return makeError(dir.string() + " is " + problem + ", not a folder this user's parts made; it is not "
                                            "used. Remove it and run the parts again");
        if (pathExists(dir / kOutFolder) && !isRealFolder(dir / kOutFolder))
            return makeError((dir / kOutFolder).string() + " is not a folder the parts made; remove "
                             + dir.string() + " and run the parts again");
        // A set without out/ was published whole (out/ renamed to the target): its part run recognises it.
        set.m_folder = dir.string();
        return set;
    }
    TESSERA_TRY(checkNew());
    const SetPlace place = setPlaces(target).front();
    const fs::path dir = place.folder / (place.prefix + kSetTag + id);
    auto made = makeSet(place, dir, planJson);
    TESSERA_TRY(made);
    if (const auto problem = untrusted(*made); !problem.empty())
        return makeError(made->string() + " is " + problem + ", not a folder this user's parts made");
    set.m_folder = made->string();
    return set;
}

bool PartSet::exists(const std::string& targetDir, const std::string& id)
{
    const fs::path target = normalTarget(targetDir);
    for (const auto& place : setPlaces(target))
        if (isRealFolder(place.folder / (place.prefix + kSetTag + id)))
            return true;
    return false;
}

std::string PartSet::outFolder() const { return (fs::path(m_folder) / kOutFolder).string(); }

std::optional<PartRecord> PartSet::readRecord(unsigned part) const
{
    auto text = readTextFile((fs::path(m_folder) / recordName(part, m_parts)).string(), 64u << 20);
    if (!text)
        return std::nullopt;
    return parseRecord(*text, m_id, part, m_parts);
}

Status PartSet::writeRecord(const PartRecord& r) const
{
    auto ranges = nlohmann::json::array();
    for (const auto& range : r.ranges)
        ranges.push_back({ { "path", range.path }, { "begin", range.begin }, { "end", range.end },
                           { "crc32", hex32(range.crc) } });
    auto extra = nlohmann::json::parse(r.extraJson.empty() ? std::string("{}") : r.extraJson, nullptr, false);
    nlohmann::json record { { "format", kRecordFormat }, { "id", m_id }, { "part", r.part }, { "parts", m_parts },
                            { "host", hostName() }, { "pid", static_cast<long long>(::getpid()) },
                            { "bytes", r.bytes }, { "seconds", r.seconds }, { "ranges", ranges },
                            { "extra", extra.is_object() ? extra : nlohmann::json::object() } };
    if (!isRealFolder(m_folder))
        return makeError(m_folder + " disappeared while part " + std::to_string(r.part) + " was written: another "
                         "run published or removed the set; run this part again if the target is not complete");
    return replaceFileAtomically((fs::path(m_folder) / recordName(r.part, m_parts)).string(), dumpJson(record));
}

void PartSet::removeRecord(unsigned part) const
{
    if (::unlink((fs::path(m_folder) / recordName(part, m_parts)).c_str()) == 0)
        (void)syncFolder(m_folder);
}

std::vector<unsigned> PartSet::missing() const
{
    std::vector<unsigned> missing;
    for (unsigned k = 0; k < m_parts; ++k)
        if (!readRecord(k))
            missing.push_back(k);
    return missing;
}

Result<std::optional<std::string>> PartSet::checkBytes(const std::vector<RecordedRange>& ranges, unsigned threads,
                                                       const std::function<bool()>& canceled) const
{
    std::mutex mutex;
    std::optional<std::string> mismatch;
    std::optional<Error> failure;
    parallelFor(ranges.size(), std::max(1u, threads), [&](std::size_t i) {
        {
            std::lock_guard<std::mutex> lock(mutex);
            if (mismatch || failure)
                return;
        }
        const auto& r = ranges[i];
        const std::string path = (fs::path(outFolder()) / r.path).string();
        auto crc = crcOfFileRange(path, r.begin, r.end, canceled);
        std::lock_guard<std::mutex> lock(mutex);
        if (!crc && crc.error().isCanceled())
            failure = crc.error();
        else if (!crc)
            mismatch = crc.error().message;
        else if (*crc != r.crc)
            mismatch = path + ": bytes " + std::to_string(r.begin) + "–" + std::to_string(r.end)
                + " are not the bytes that were recorded (CRC-32 " + hex32(*crc) + ", recorded " + hex32(r.crc) + ")";
    });
    if (failure)
        return *failure;
    return mismatch;
}

Result<PublishClaim> PartSet::claim(std::vector<std::string>& notes) const
{
    PublishClaim claim;
    const fs::path set(m_folder);
    const std::string who = hostName() + " " + std::to_string(::getpid());
    const fs::path mine = uniqueSiblingName((set / kClaim).string(), "mine");
    const fs::path path = set / kClaim;
    // Parts that finish together all see the set complete; the one that claims it first may publish it and remove
    // the folder while another is still making its claim. A set folder gone means it was finished elsewhere.
    auto finishedElsewhere = [&] { return !isRealFolder(set); };
    if (auto written = writeFileSynced(mine.string(), who + "\n"); !written)
        return finishedElsewhere() ? Result<PublishClaim>(std::move(claim)) : Result<PublishClaim>(written.error());
    claim.m_fd = ::open(mine.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (claim.m_fd < 0) {
        if (finishedElsewhere())
            return PublishClaim();
        return makeError(mine.string() + ": cannot be opened: " + errnoText());
    }
    // Locked before it is linked into place: nobody can ever see this claim unlocked while we live.
    (void)::flock(claim.m_fd, LOCK_EX | LOCK_NB);
    if (::link(mine.c_str(), path.c_str()) == 0) {
        ::unlink(mine.c_str());
        return claim;
    }
    if (errno != EEXIST) {
        const std::string reason = errnoText();
        ::unlink(mine.c_str());
        if (finishedElsewhere())
            return PublishClaim();
        return makeError(path.string() + ": cannot be created: " + reason);
    }
    // A claim is there: it is void when its holder died (its lock is free, or without flock support, its
    // process on this host is gone).
    claim.m_previous = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    auto previousText = readTextFile(path.string(), 4096);
    const std::string previous = previousText ? *previousText : "?\n";
    bool dead = false;
    if (claim.m_previous >= 0) {
        if (::flock(claim.m_previous, LOCK_EX | LOCK_NB) == 0)
            dead = true;
        else if (errno != EWOULDBLOCK)
            dead = processGone(previous);
    }
    if (!dead) {
        ::unlink(mine.c_str());
        return PublishClaim();
    }
    if (::rename(mine.c_str(), path.c_str()) != 0) {
        const std::string reason = errnoText();
        ::unlink(mine.c_str());
        return makeError(path.string() + ": cannot be taken over: " + reason);
    }
    notes.push_back("took over publishing from " + previous.substr(0, previous.find('\n'))
                    + ", which stopped before it was done");
    return claim;
}

bool PartSet::publishInterrupted() const { return readJournal(outFolder()).has_value(); }

bool PartSet::publishedWhole() const { return !pathExists(outFolder()); }

void PartSet::retireIfExists(const std::string& targetDir, const std::string& id)
{
    const fs::path target = normalTarget(targetDir);
    for (const auto& place : setPlaces(target)) {
        const fs::path dir = place.folder / (place.prefix + kSetTag + id);
        if (isRealFolder(dir) && untrusted(dir).empty())
            retireFolder(dir);
    }
}

Result<bool> PartSet::publish(const std::string& target, const std::vector<std::string>& files,
                              const std::vector<std::string>& keystones) const
{
    auto staging = OutputStaging::adopt(normalTarget(target).string(), outFolder());
    TESSERA_TRY(staging);
    const bool earlier = staging->completedEarlier();
    if (!earlier)
        TESSERA_TRY(staging->publish(files, keystones));
    return earlier;
}

void PartSet::retire() const { retireFolder(m_folder); }

std::vector<PartsSetStatus> PartSet::status(const std::string& targetDir)
{
    std::vector<PartsSetStatus> sets;
    const fs::path target = normalTarget(targetDir);
    for (const auto& place : setPlaces(target)) {
        const std::string prefix = place.prefix + kSetTag;
        std::error_code ec;
        std::vector<fs::path> found;
        for (const auto& entry : folderEntries(place.folder, ec)) {
            const std::string name = entry.path().filename().string();
            if (name.rfind(prefix, 0) == 0 && name.size() == prefix.size() + kIdLength && isRealFolder(entry.path()))
                found.push_back(entry.path());
        }
        std::sort(found.begin(), found.end());
        for (const auto& dir : found) {
            PartsSetStatus s;
            s.folder = dir.string();
            s.id = dir.filename().string().substr(prefix.size());
            if (auto text = readTextFile((dir / kPlanFile).string())) {
                auto j = nlohmann::json::parse(*text, nullptr, false);
                if (j.is_object() && j.value("id", "") == s.id && j["parts"].is_number_unsigned()
                    && j["parts"].get<std::uint64_t>() <= 1'000'000) {
                    s.parts = j["parts"].get<unsigned>();
                    s.totalBytes = j.value("total_bytes", std::uint64_t(0));
                    if (j["shares"].is_array())
                        for (const auto& share : j["shares"])
                            if (share.is_object())
                                s.shareBytes.push_back(share.value("bytes", std::uint64_t(0)));
                }
            }
            PartSet set;
            set.m_folder = s.folder;
            set.m_id = s.id;
            set.m_parts = s.parts;
            for (unsigned k = 0; k < s.parts; ++k) {
                if (auto r = set.readRecord(k))
                    s.done.push_back(*r);
                else
                    s.missing.push_back(k);
            }
            if (auto claim = readTextFile((dir / kClaim).string(), 4096)) {
                s.finisher = claimHolder(*claim);
                const int fd = ::open((dir / kClaim).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd >= 0) {
                    s.finisherAlive = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
                    ::close(fd);
                }
            }
            sets.push_back(std::move(s));
        }
    }
    return sets;
}

Result<std::vector<std::string>> PartSet::discardAll(const std::string& target)
{
    std::vector<std::string> notes;
    for (const auto& s : status(target)) {
        if (s.finisher && s.finisherAlive)
            return makeError(s.folder + " is being published by " + printableText(s.finisher->host)
                             + (s.finisher->pid ? " pid " + std::to_string(*s.finisher->pid) : std::string())
                             + "; it is not discarded");
        if (const auto problem = untrusted(s.folder); !problem.empty())
            return makeError(s.folder + " is " + problem + "; remove it yourself if it is not wanted");
        retireFolder(s.folder);
        TargetLock::removeSetLock(target, s.id);
        notes.push_back("discarded " + s.folder + " (" + std::to_string(s.done.size()) + " of "
                        + std::to_string(s.parts) + " parts done)");
    }
    return notes;
}

Result<std::uint32_t> crcOfFileRange(const std::string& path, std::uint64_t begin, std::uint64_t end,
                                     const std::function<bool()>& canceled)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return makeError(path + ": cannot be read (" + errnoText() + ")");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
        ::close(fd);
        return makeError(path + ": not a regular file of this user's; it was not written by the parts");
    }
    if (static_cast<std::uint64_t>(st.st_size) < end) {
        ::close(fd);
        return makeError(path + ": ends at byte " + std::to_string(st.st_size) + ", before byte " + std::to_string(end)
                         + " (cut short or replaced)");
    }
    std::vector<std::uint8_t> buffer(8u << 20);
    std::uint32_t crc = 0;
    Status status;
    for (std::uint64_t at = begin; at < end && status;) {
        if (canceled && canceled()) {
            status = canceledError();
            break;
        }
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), end - at));
        const ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(at));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            status = makeError(path + ": ends before byte " + std::to_string(end) + " ("
                               + (n < 0 ? errnoText() : "short file") + ")");
            break;
        }
        crc = crc32Update(crc, buffer.data(), static_cast<std::size_t>(n));
        at += static_cast<std::uint64_t>(n);
    }
    ::posix_fadvise(fd, static_cast<off_t>(begin), static_cast<off_t>(end - begin), POSIX_FADV_DONTNEED);
    ::close(fd);
    if (!status)
        return status.error();
    return crc;
}

} // namespace tessera
