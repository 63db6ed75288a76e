// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/merge_parts.h"

#include "io/fnv_hash.h"

#include "io/crc32.h"
#include "io/durable_file.h"
#include "io/path_kinds.h"
#include "io/text_file.h"
#include "merge/output_staging.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>

namespace fs = std::filesystem;

namespace tessera {

namespace {

constexpr const char* kSetTag = "tessera-parts-";
constexpr const char* kRecordFormat = "tessera-merge-part-1";
constexpr const char* kPlanFile = "plan.json";
constexpr const char* kOutFolder = "out";
constexpr const char* kClaim = "finishing";

std::string errnoText() { return std::strerror(errno); }

/// A small text file's content, or `fallback` when it cannot be read.
std::string textOr(const fs::path& path, const std::string& fallback)
{
    auto text = readTextFile(path.string());
    return text ? *text : fallback;
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

std::string outputPath(const MergeOutput& o, const std::string& name)
{
    return o.subfolder.empty() ? name : o.subfolder + "/" + name;
}

/// The source files a plan reads, by their path below the checkpoint (the same on every node, whatever the
/// mount point), with their sizes and modification times: a checkpoint rewritten in place gets a new set.
void hashSources(FnvHash& fnv, const MergeOutput& o)
{
    std::set<std::string> files;
    auto addPieces = [&](const TensorInfo& t) {
        for (const auto& p : t.pieces)
            files.insert(p.file);
    };
    for (const auto& planned : o.plan->tensors) {
        if (planned.source < o.info->tensors.size())
            addPieces(o.info->tensors[planned.source]);
        if (planned.delta) {
            addPieces(planned.delta->a);
            addPieces(planned.delta->b);
        }
    }
    for (const auto& file : files) {
        fs::path rel = fs::path(file).lexically_relative(o.info->root);
        if (rel.empty() || rel.begin()->string() == "..")
            rel = fs::path(file).filename();
        struct stat st {};
        if (::stat(file.c_str(), &st) != 0)
            st = {};
        fnv.add(rel.string()).add(std::uint64_t(st.st_size)).add(std::uint64_t(st.st_mtim.tv_sec))
            .add(std::uint64_t(st.st_mtim.tv_nsec));
    }
}

std::string setName(const std::string& prefix, const std::string& id) { return prefix + kSetTag + id; }

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

nlohmann::json rangesJson(const PartShare& share)
{
    auto ranges = nlohmann::json::array();
    for (const auto& r : share.ranges)
        ranges.push_back({ { "path", r.path }, { "begin", r.begin }, { "end", r.end } });
    return ranges;
}

std::string planJsonText(const PartsPlan& plan, const std::string& target)
{
    nlohmann::json j { { "format", kRecordFormat }, { "id", plan.id }, { "parts", plan.parts },
                       { "target", target }, { "total_bytes", plan.totalBytes } };
    auto shares = nlohmann::json::array();
    for (unsigned k = 0; k < plan.parts; ++k)
        shares.push_back({ { "part", k }, { "bytes", plan.shares[k].bytes }, { "ranges", rangesJson(plan.shares[k]) } });
    j["shares"] = shares;
    return j.dump(1) + "\n";
}

/// Writes `text` to `path` through a unique temporary name and a rename, flushed: readers see all or nothing,
/// and several processes writing the same bytes at once do not disturb each other.
Status writeAtomically(const fs::path& path, const std::string& text)
{
    std::random_device rd;
    const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    TESSERA_TRY(writeFileSynced(tmp.string(), text));
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string reason = errnoText();
        ::unlink(tmp.c_str());
        return makeError(path.string() + ": cannot be written: " + reason);
    }
    return syncFolder(path.parent_path().string());
}

/// a·b mod P in the bit-reflected domain of the ZIP CRC (bit 31 is x^0).
std::uint32_t multiplyModP(std::uint32_t a, std::uint32_t b)
{
    std::uint32_t product = 0;
    for (std::uint32_t m = 1u << 31; m != 0; m >>= 1) {
        if (a & m)
            product ^= b;
        b = (b & 1) ? (b >> 1) ^ 0xEDB88320u : b >> 1;
    }
    return product;
}

/// The CRC-32 of A followed by B from crc(A), crc(B) and B's length: crc(A) is carried over B's 8·lengthB zero
/// bits by multiplying with x^(8·lengthB) mod P (computed by squaring), then crc(B) is added.
std::uint32_t crc32Combine(std::uint32_t crcA, std::uint32_t crcB, std::uint64_t lengthB)
{
    std::uint32_t power = 1u << 31; // x^0
    std::uint32_t square = 1u << 23; // x^8: one byte
    for (std::uint64_t n = lengthB; n != 0; n >>= 1) {
        if (n & 1)
            power = multiplyModP(power, square);
        square = multiplyModP(square, square);
    }
    return multiplyModP(power, crcA) ^ crcB;
}

/// A block of tensor bytes a part wrote, with its CRC-32 (computed as it was written).
struct WrittenBlock {
    std::size_t output = 0, file = 0;
    std::uint64_t offset = 0, length = 0;
    std::uint32_t crc = 0;
};

/// The CRC-32 of [begin, end) of one file from the blocks written there; nullopt unless they tile it exactly.
std::optional<std::uint32_t> crcFromBlocks(std::vector<WrittenBlock>& blocks, const PartRange& range)
{
    std::vector<const WrittenBlock*> inside;
    for (const auto& b : blocks)
        if (b.output == range.output && b.file == range.file && b.offset >= range.begin && b.offset < range.end)
            inside.push_back(&b);
    std::sort(inside.begin(), inside.end(), [](const WrittenBlock* a, const WrittenBlock* b) { return a->offset < b->offset; });
    std::uint32_t crc = 0;
    std::uint64_t at = range.begin;
    for (const auto* b : inside) {
        if (b->offset != at)
            return std::nullopt;
        crc = crc32Combine(crc, b->crc, b->length);
        at += b->length;
    }
    if (at != range.end)
        return std::nullopt;
    return crc;
}

/// CRC-32 of bytes [begin, end) of `path`.
Result<std::uint32_t> crcOfRange(const std::string& path, std::uint64_t begin, std::uint64_t end,
                                 const std::function<bool()>& canceled)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return makeError(path + ": cannot be read: " + errnoText());
    std::vector<std::uint8_t> buffer(8u << 20);
    std::uint32_t crc = 0;
    Status status;
    for (std::uint64_t at = begin; at < end && status;) {
        if (canceled && canceled()) {
            status = makeError("canceled");
            break;
        }
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), end - at));
        const ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(at));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            status = makeError(path + ": ends before byte " + std::to_string(end) + " (" + (n < 0 ? errnoText() : "short file") + ")");
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

/// A part's record as read from disk; nullopt when absent or not a record of this set.
struct ReadRecord {
    PartRecord record;
    std::vector<PartRange> ranges;
    std::vector<std::string> crcs;
};

std::optional<ReadRecord> readRecord(const fs::path& path, const std::string& id, unsigned part, unsigned parts)
{
    auto text = readTextFile(path.string());
    if (!text)
        return std::nullopt;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return std::nullopt;
    try {
        if (j.value("format", "") != kRecordFormat || j.value("id", "") != id || j.value("part", -1) != int(part)
            || j.value("parts", -1) != int(parts) || !j["ranges"].is_array())
            return std::nullopt;
        ReadRecord r;
        r.record.part = part;
        r.record.bytes = j.value("bytes", std::uint64_t(0));
        r.record.seconds = j.value("seconds", 0.0);
        r.record.host = j.value("host", "");
        r.record.pid = j.value("pid", 0L);
        for (const auto& range : j["ranges"]) {
            PartRange pr;
            pr.path = range.at("path").get<std::string>();
            pr.begin = range.at("begin").get<std::uint64_t>();
            pr.end = range.at("end").get<std::uint64_t>();
            r.ranges.push_back(pr);
            r.crcs.push_back(range.at("crc32").get<std::string>());
        }
        return r;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

/// Checks a part's bytes against its record (the ranges the plan gives it, and their CRC-32).
Result<bool> recordMatchesFiles(const ReadRecord& r, const PartShare& share, const fs::path& out,
                                const std::function<bool()>& canceled)
{
    if (r.ranges != share.ranges)
        return false;
    for (std::size_t i = 0; i < r.ranges.size(); ++i) {
        auto crc = crcOfRange((out / r.ranges[i].path).string(), r.ranges[i].begin, r.ranges[i].end, canceled);
        if (!crc && crc.error().message == "canceled")
            return crc.error();
        if (!crc || hex32(*crc) != r.crcs[i])
            return false;
    }
    return true;
}

/// The claim of the process that publishes a complete set. Held with flock for as long as that process lives;
/// a claim whose holder died is taken over. Returns the locked descriptors (to keep open until done), or
/// nothing when another live process holds the claim.
struct Claim {
    int mine = -1;
    int previous = -1; ///< a dead holder's claim, kept locked so no third process takes it over too
    ~Claim()
    {
        if (mine >= 0)
            ::close(mine);
        if (previous >= 0)
            ::close(previous);
    }
};

bool processGone(const std::string& claimText)
{
    const auto space = claimText.find(' ');
    if (space == std::string::npos || claimText.substr(0, space) != hostName())
        return false;
    const long pid = std::atol(claimText.c_str() + space + 1);
    return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

Result<std::unique_ptr<Claim>> claimFinishing(const fs::path& set, std::vector<std::string>& notes)
{
    auto claim = std::make_unique<Claim>();
    const std::string who = hostName() + " " + std::to_string(::getpid());
    const fs::path mine = set / (std::string(kClaim) + "." + hostName() + "." + std::to_string(::getpid()));
    const fs::path path = set / kClaim;
    // Parts that finish together all see the set complete; the one that claims it first may publish it and remove
    // the folder while another is still making its claim. A set folder gone means it was finished elsewhere.
    auto finishedElsewhere = [&] { return !isFolder(set); };
    if (auto written = writeFileSynced(mine.string(), who + "\n"); !written)
        return finishedElsewhere() ? Result<std::unique_ptr<Claim>>(std::unique_ptr<Claim>()) : written.error();
    claim->mine = ::open(mine.c_str(), O_RDONLY | O_CLOEXEC);
    if (claim->mine < 0) {
        if (finishedElsewhere())
            return std::unique_ptr<Claim>();
        return makeError(mine.string() + ": cannot be opened: " + errnoText());
    }
    // Locked before it is linked into place: nobody can ever see this claim unlocked while we live.
    (void)::flock(claim->mine, LOCK_EX | LOCK_NB);
    if (::link(mine.c_str(), path.c_str()) == 0) {
        ::unlink(mine.c_str());
        return claim;
    }
    if (errno != EEXIST) {
        const std::string reason = errnoText();
        ::unlink(mine.c_str());
        if (finishedElsewhere())
            return std::unique_ptr<Claim>();
        return makeError(path.string() + ": cannot be created: " + reason);
    }
    // A claim is there: it is void when its holder died (its lock is free, or without flock support, its
    // process on this host is gone).
    claim->previous = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    bool dead = false;
    if (claim->previous >= 0) {
        if (::flock(claim->previous, LOCK_EX | LOCK_NB) == 0)
            dead = true;
        else if (errno != EWOULDBLOCK)
            dead = processGone(textOr(path, ""));
    }
    if (!dead) {
        ::unlink(mine.c_str());
        return std::unique_ptr<Claim>();
    }
    const std::string previous = textOr(path, "?\n");
    if (::rename(mine.c_str(), path.c_str()) != 0) {
        const std::string reason = errnoText();
        ::unlink(mine.c_str());
        return makeError(path.string() + ": cannot be taken over: " + reason);
    }
    notes.push_back("took over publishing from " + previous.substr(0, previous.find('\n'))
                    + ", which stopped before it was done");
    return claim;
}

/// Removes a set folder (renamed first, so that no part ever writes into a folder being removed).
void retireSet(const fs::path& set)
{
    std::random_device rd;
    const fs::path done = set.string() + ".done-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    std::error_code ec;
    if (::rename(set.c_str(), done.c_str()) == 0)
        fs::remove_all(done, ec);
    (void)syncFolder(set.parent_path().string());
}

/// The set's folder: found where a part made it, else made (whole, with its plan.json and out/, then renamed into
/// place, so a set's folder is never seen half made) where a single merge would stage. A set folder without out/
/// was published by a process that stopped before removing it: it is removed and a new set begins.
/// Removes what interrupted parts left beside their sets: folders renamed for removal (".done-…"), and folders
/// begun more than ten minutes ago but never renamed into place (".new-…"; a live part renames its own at once).
void removeLeftovers(const fs::path& target, const std::function<void(const std::string&)>& note)
{
    const auto now = fs::file_time_type::clock::now();
    for (const auto& place : setPlaces(target)) {
        const std::string prefix = place.prefix + kSetTag;
        std::error_code ec;
        std::vector<fs::path> leftovers;
        for (const auto& entry : folderEntries(place.folder, ec)) {
            const std::string name = entry.path().filename().string();
            if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 17 || !isRealFolder(entry.path()))
                continue;
            const std::string tail = name.substr(prefix.size() + 16);
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

Result<fs::path> openSet(const fs::path& target, const std::string& id, const std::string& planJson,
                         const std::function<Status()>& checkNew, const std::function<void(const std::string&)>& note)
{
    removeLeftovers(target, note);
    for (const auto& place : setPlaces(target)) {
        const fs::path set = place.folder / setName(place.prefix, id);
        if (!isFolder(set))
            continue;
        if (isFolder(set / kOutFolder))
            return set;
        retireSet(set);
        note("removed " + set.string() + ", left by parts whose output was published");
    }
    TESSERA_TRY(checkNew());
    const SetPlace place = setPlaces(target).front();
    std::error_code ec;
    fs::create_directories(place.folder, ec);
    if (ec)
        return makeError("cannot create folder " + place.folder.string() + ": " + ec.message());
    const fs::path set = place.folder / setName(place.prefix, id);
    std::random_device rd;
    const fs::path fresh = set.string() + ".new-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    if (::mkdir(fresh.c_str(), 0777) != 0)
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
    // Another part made it first: use theirs.
    if ((renameError == EEXIST || renameError == ENOTEMPTY) && isFolder(set / kOutFolder))
        return set;
    return makeError("cannot create the shared folder " + set.string() + ": " + std::strerror(renameError));
}

/// Part `k`'s ranges and records as the plan expects them, or every reason they are not.
Status verifyRecords(const PartsPlan& plan, const fs::path& set)
{
    std::string problems;
    for (unsigned k = 0; k < plan.parts; ++k) {
        const auto r = readRecord(set / recordName(k, plan.parts), plan.id, k, plan.parts);
        if (!r)
            problems += "\n  part " + std::to_string(k) + ": no valid record";
        else if (r->ranges != plan.shares[k].ranges)
            problems += "\n  part " + std::to_string(k) + ": its record lists other byte ranges than the plan";
    }
    if (!problems.empty())
        return makeError("the parts' records in " + set.string() + " do not match the plan:" + problems);
    return Status::success();
}

} // namespace

Result<PartsPlan> planParts(const std::vector<MergeOutput>& outputs, unsigned parts)
{
    if (parts == 0)
        return makeError("the number of parts must be at least 1");
    PartsPlan plan;
    plan.parts = parts;
    plan.shares.resize(parts);

    // Every tensor of every file as one stream of bytes, in publish order.
    struct Unit {
        std::size_t output, file, tensor;
        std::uint64_t start, bytes;
    };
    std::vector<Unit> units;
    std::vector<std::uint64_t> fileEnds; ///< stream offsets where a file ends
    std::uint64_t at = 0;
    for (std::size_t o = 0; o < outputs.size(); ++o) {
        const MergePlan& p = *outputs[o].plan;
        for (std::size_t f = 0; f < p.files.size(); ++f) {
            std::vector<std::size_t> order = p.files[f].tensors;
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
                return p.tensors[a].fileOffset < p.tensors[b].fileOffset;
            });
            for (std::size_t t : order) {
                units.push_back({ o, f, t, at, p.tensors[t].bytes });
                at += p.tensors[t].bytes;
                plan.largestTensorBytes = std::max(plan.largestTensorBytes, p.tensors[t].bytes);
            }
            fileEnds.push_back(at);
        }
    }
    plan.totalBytes = at;

    // The cuts between parts: the ideal k·T/N moved to a file boundary within an eighth of a share, else to the
    // nearest tensor boundary; never before the previous cut.
    std::vector<std::uint64_t> tensorEnds;
    for (const auto& u : units)
        tensorEnds.push_back(u.start + u.bytes);
    const std::uint64_t total = plan.totalBytes;
    const std::uint64_t share = total / parts;
    const std::uint64_t slack = share / 8;
    auto nearest = [](const std::vector<std::uint64_t>& sorted, std::uint64_t x) -> std::optional<std::uint64_t> {
        auto it = std::lower_bound(sorted.begin(), sorted.end(), x);
        std::optional<std::uint64_t> best;
        if (it != sorted.end())
            best = *it;
        if (it != sorted.begin() && (!best || x - *(it - 1) <= *best - x))
            best = *(it - 1);
        return best;
    };
    std::vector<std::uint64_t> cuts { 0 };
    for (unsigned k = 1; k < parts; ++k) {
        const std::uint64_t ideal = share * k + (total % parts) * k / parts;
        std::uint64_t cut = 0;
        if (auto f = nearest(fileEnds, ideal); f && (*f > ideal ? *f - ideal : ideal - *f) <= slack)
            cut = *f;
        else if (auto t = nearest(tensorEnds, ideal))
            cut = *t;
        cuts.push_back(std::max(cut, cuts.back()));
    }

    // Each tensor goes to the part whose share holds its first byte (an empty tensor: the last such part).
    for (const auto& u : units) {
        const auto k = static_cast<unsigned>(std::upper_bound(cuts.begin(), cuts.end(), u.start) - cuts.begin() - 1);
        PartShare& s = plan.shares[k];
        const MergePlan& p = *outputs[u.output].plan;
        const PlannedTensor& t = p.tensors[u.tensor];
        if (s.ranges.empty() || s.ranges.back().output != u.output || s.ranges.back().file != u.file
            || s.ranges.back().end != t.fileOffset) {
            PartRange r;
            r.output = u.output;
            r.file = u.file;
            r.path = outputPath(outputs[u.output], p.files[u.file].name);
            r.begin = r.end = t.fileOffset;
            s.ranges.push_back(std::move(r));
        }
        s.ranges.back().end = t.fileOffset + t.bytes;
        s.ranges.back().tensors.push_back(u.tensor);
        s.bytes += t.bytes;
    }
    for (auto& s : plan.shares)
        for (const auto& r : s.ranges) {
            const PlannedFile& f = outputs[r.output].plan->files[r.file];
            if (r.tensors.size() == f.tensors.size())
                ++s.wholeFiles;
        }

    // The id: everything that decides the bytes of the files and who writes which.
    FnvHash fnv;
    fnv.add(std::string(kRecordFormat)).add(std::uint64_t(parts));
    for (const auto& o : outputs) {
        const MergePlan& p = *o.plan;
        fnv.add(o.subfolder).add(p.layout).add(p.indexJson).add(std::uint64_t(p.configDtype ? int(*p.configDtype) + 1 : 0))
            .add(std::uint64_t(p.configTied)).add(std::uint64_t(p.configDequantized));
        for (const auto& f : p.files)
            fnv.add(f.name).add(f.size).add(f.header);
        for (const auto& s : p.sideFiles)
            fnv.add(s);
        for (const auto& [name, content] : p.generatedFiles)
            fnv.add(name).add(content);
        for (const auto& t : p.tensors)
            fnv.add(t.name).add(std::uint64_t(t.source)).add(std::uint64_t(t.mode)).add(t.bytes).add(t.fileOffset);
        hashSources(fnv, o);
    }
    for (const auto& s : plan.shares)
        for (const auto& r : s.ranges)
            fnv.add(r.path).add(r.begin).add(r.end);
    plan.id = fnv.hex();
    return plan;
}

Result<PartOutcome> runMergePart(const std::vector<MergeOutput>& outputs, const PartsPlan& plan, unsigned part,
                                 const std::string& targetDir, const MergeRunOptions& options, const PartWriting& writing)
{
    if (part >= plan.parts || plan.shares.size() != plan.parts)
        return makeError("part " + std::to_string(part) + " does not exist: parts are numbered 0 to "
                         + std::to_string(plan.parts - 1));
    const auto start = std::chrono::steady_clock::now();
    PartOutcome outcome;
    auto note = [&](const std::string& text) {
        outcome.notes.push_back(text);
        if (options.onNote)
            options.onNote(text);
    };
    auto canceled = [&] {
        return (options.cancel && options.cancel->load()) || (options.progress && options.progress->isCanceled());
    };
    const MergeOutput* top = nullptr;
    for (const auto& o : outputs)
        if (o.subfolder.empty())
            top = &o;
    TESSERA_TRY(OutputStaging::checkTarget(targetDir, top ? top->plan->outputFileNames() : std::vector<std::string>()));
    const fs::path target = normalTarget(targetDir);
    // Dead single-process runs' folders go; a set's folder never matches their names.
    for (const auto& n : OutputStaging::removeStale(targetDir))
        note(n);

    auto write = [&](const MergeOutput& o, const std::string& dir, const MergeRunOptions& run) {
        return writing.write ? writing.write(o, dir, run) : writeMergedFiles(*o.info, *o.plan, dir, run);
    };
    auto opened = openSet(target, plan.id, planJsonText(plan, target.string()),
                          [&] { return writing.checkTarget ? writing.checkTarget(targetDir)
                                                           : checkMergeTargets(outputs, targetDir); }, note);
    TESSERA_TRY(opened);
    const fs::path set = *opened;
    outcome.setFolder = set.string();
    const fs::path out = set / kOutFolder;
    for (const auto& o : outputs)
        if (!o.subfolder.empty() && ::mkdir((out / o.subfolder).c_str(), 0777) != 0 && errno != EEXIST)
            return makeError("cannot create " + (out / o.subfolder).string() + ": " + errnoText());

    // This part's bytes: checked when a record says they are there, else written and recorded.
    const PartShare& share = plan.shares[part];
    const fs::path recordPath = set / recordName(part, plan.parts);
    if (auto record = readRecord(recordPath, plan.id, part, plan.parts)) {
        auto matches = recordMatchesFiles(*record, share, out, canceled);
        TESSERA_TRY(matches);
        outcome.alreadyDone = *matches;
        if (!*matches)
            note("the bytes part " + std::to_string(part) + " recorded have changed since; writing them again");
    }
    if (!outcome.alreadyDone) {
        // A record that no longer holds goes before any byte is rewritten, so no finisher can trust it meanwhile.
        if (::unlink(recordPath.c_str()) == 0)
            TESSERA_TRY(syncFolder(set.string()));
        std::mutex blocksMutex;
        std::vector<WrittenBlock> blocks;
        for (std::size_t o = 0; o < outputs.size(); ++o) {
            std::vector<bool> selected(outputs[o].plan->tensors.size(), false);
            bool any = false;
            for (const auto& r : share.ranges)
                if (r.output == o)
                    for (auto t : r.tensors)
                        selected[t] = any = true;
            if (!any)
                continue;
            MergeRunOptions run = options;
            run.onlyTensors = &selected;
            run.writeFinish = false;
            run.onTensorBytes = [&, o](std::size_t file, std::uint64_t offset, const std::uint8_t* data,
                                       std::uint64_t length) {
                const std::uint32_t crc = crc32Update(0, data, static_cast<std::size_t>(length));
                std::lock_guard<std::mutex> lock(blocksMutex);
                blocks.push_back({ o, file, offset, length, crc });
            };
            const fs::path dir = outputs[o].subfolder.empty() ? out : out / outputs[o].subfolder;
            auto written = write(outputs[o], dir.string(), run);
            TESSERA_TRY(written);
            outcome.bytesWritten += written->bytesWritten;
        }
        nlohmann::json record { { "format", kRecordFormat }, { "id", plan.id }, { "part", part },
                                { "parts", plan.parts }, { "host", hostName() }, { "pid", long(::getpid()) },
                                { "bytes", share.bytes } };
        auto ranges = rangesJson(share);
        for (std::size_t i = 0; i < share.ranges.size(); ++i) {
            const auto& r = share.ranges[i];
            // Combined from the blocks as they were written; read back only if they do not cover the range.
            if (auto combined = crcFromBlocks(blocks, r)) {
                ranges[i]["crc32"] = hex32(*combined);
                continue;
            }
            auto crc = crcOfRange((out / r.path).string(), r.begin, r.end, canceled);
            TESSERA_TRY(crc);
            ranges[i]["crc32"] = hex32(*crc);
        }
        record["ranges"] = ranges;
        record["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!isFolder(set))
            return makeError(set.string() + " disappeared while part " + std::to_string(part)
                             + " was written: another run published or removed the set; run this part again if "
                               "the target is not complete");
        TESSERA_TRY(writeAtomically(recordPath, record.dump(1) + "\n"));
    }

    // Done: is the set complete?
    for (unsigned k = 0; k < plan.parts; ++k)
        if (!pathExists(set / recordName(k, plan.parts)))
            outcome.missing.push_back(k);
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!outcome.missing.empty())
        return outcome;
    auto claim = claimFinishing(set, outcome.notes);
    TESSERA_TRY(claim);
    if (!*claim) {
        outcome.finishingElsewhere = true;
        return outcome;
    }

    // The last part: verify, write what only the complete set can have, publish.
    TESSERA_TRY(verifyRecords(plan, set));
    for (const auto& o : outputs)
        for (const auto& f : o.plan->files) {
            struct stat st {};
            const fs::path p = out / outputPath(o, f.name);
            if (::stat(p.c_str(), &st) != 0 || std::uint64_t(st.st_size) != f.size)
                return makeError(p.string() + ": missing or not " + std::to_string(f.size) + " bytes long, though "
                                 "every part recorded its bytes");
        }
    MergeOutcome total;
    for (const auto& o : outputs) {
        std::vector<bool> none(o.plan->tensors.size(), false);
        MergeRunOptions run = options;
        run.onlyTensors = &none;
        run.writeFinish = true;
        run.progress = nullptr;
        const fs::path dir = o.subfolder.empty() ? out : out / o.subfolder;
        auto finished = write(o, dir.string(), run);
        TESSERA_TRY(finished);
        for (const auto& f : finished->files)
            outcome.files.push_back(outputPath(o, f));
        outcome.warnings.insert(outcome.warnings.end(), finished->warnings.begin(), finished->warnings.end());
        if (!o.subfolder.empty())
            TESSERA_TRY(syncFolder(dir.string()));
    }
    std::vector<std::string> keystones = writing.keystones;
    if (keystones.empty()) {
        if (top && !top->plan->indexJson.empty())
            keystones.push_back("model.safetensors.index.json");
        else if (top && !top->plan->files.empty())
            keystones.push_back(top->plan->files.front().name);
        keystones.push_back("config.json");
    }
    auto staging = OutputStaging::adopt(target.string(), out.string());
    TESSERA_TRY(staging);
    TESSERA_TRY(staging->publish(keystones));
    outcome.published = true;
    // The records and the claim go; renamed first, so a part started now never writes into a folder being removed.
    retireSet(set);
    outcome.setFolder.clear();
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return outcome;
}

std::vector<PartsSetStatus> partsStatus(const std::string& targetDir)
{
    std::vector<PartsSetStatus> sets;
    const fs::path target = normalTarget(targetDir);
    for (const auto& place : setPlaces(target)) {
        const std::string prefix = place.prefix + kSetTag;
        std::error_code ec;
        std::vector<fs::path> found;
        for (const auto& entry : folderEntries(place.folder, ec)) {
            const std::string name = entry.path().filename().string();
            if (name.rfind(prefix, 0) == 0 && name.size() == prefix.size() + 16 && isFolder(entry.path()))
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
            for (unsigned k = 0; k < s.parts; ++k) {
                if (auto r = readRecord(dir / recordName(k, s.parts), s.id, k, s.parts))
                    s.done.push_back(r->record);
                else
                    s.missing.push_back(k);
            }
            if (auto claim = readTextFile((dir / kClaim).string())) {
                s.finisher = claim->substr(0, claim->find('\n'));
                const int fd = ::open((dir / kClaim).c_str(), O_RDONLY | O_CLOEXEC);
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

namespace parts {

std::string planJson(const std::string& id, unsigned parts, const std::string& target, std::uint64_t totalBytes,
                     const std::vector<std::uint64_t>& shareBytes)
{
    nlohmann::json j { { "format", kRecordFormat }, { "id", id }, { "parts", parts }, { "target", target },
                       { "total_bytes", totalBytes } };
    auto shares = nlohmann::json::array();
    for (std::size_t k = 0; k < shareBytes.size(); ++k)
        shares.push_back({ { "part", k }, { "bytes", shareBytes[k] } });
    j["shares"] = shares;
    return j.dump(1) + "\n";
}

Result<std::string> openSet(const std::string& targetDir, const std::string& id, const std::string& planJsonText,
                            const std::function<Status()>& checkNew, const std::function<void(const std::string&)>& note)
{
    auto set = tessera::openSet(normalTarget(targetDir), id, planJsonText, checkNew, note);
    TESSERA_TRY(set);
    return set->string();
}

Result<std::optional<std::string>> readRecordExtra(const std::string& set, const std::string& id, unsigned part,
                                                   unsigned parts, const std::vector<RecordedFile>& expected)
{
    const fs::path path = fs::path(set) / recordName(part, parts);
    auto r = readRecord(path, id, part, parts);
    if (!r || r->ranges.size() != expected.size())
        return std::optional<std::string>();
    for (std::size_t i = 0; i < expected.size(); ++i)
        if (r->ranges[i].path != expected[i].path || r->ranges[i].begin != 0 || r->ranges[i].end != expected[i].size
            || r->crcs[i] != hex32(expected[i].crc))
            return std::optional<std::string>();
    auto text = readTextFile(path.string());
    TESSERA_TRY(text);
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return std::optional<std::string>();
    return std::optional<std::string>(j.value("extra", nlohmann::json::object()).dump());
}

Result<std::optional<std::vector<RecordedFile>>> readRecordFiles(const std::string& set, const std::string& id,
                                                                 unsigned part, unsigned parts)
{
    auto r = readRecord(fs::path(set) / recordName(part, parts), id, part, parts);
    if (!r)
        return std::optional<std::vector<RecordedFile>>();
    std::vector<RecordedFile> files;
    for (std::size_t i = 0; i < r->ranges.size(); ++i) {
        if (r->ranges[i].begin != 0)
            return std::optional<std::vector<RecordedFile>>();
        files.push_back({ r->ranges[i].path, r->ranges[i].end,
                          static_cast<std::uint32_t>(std::strtoul(r->crcs[i].c_str(), nullptr, 16)) });
    }
    return std::optional<std::vector<RecordedFile>>(std::move(files));
}

Status writeRecord(const std::string& set, const std::string& id, unsigned part, unsigned parts,
                   const std::vector<RecordedFile>& files, const std::string& extraJson, double seconds)
{
    std::uint64_t bytes = 0;
    auto ranges = nlohmann::json::array();
    for (const auto& f : files) {
        ranges.push_back({ { "path", f.path }, { "begin", 0 }, { "end", f.size }, { "crc32", hex32(f.crc) } });
        bytes += f.size;
    }
    nlohmann::json record { { "format", kRecordFormat }, { "id", id }, { "part", part }, { "parts", parts },
                            { "host", hostName() }, { "pid", long(::getpid()) }, { "bytes", bytes },
                            { "seconds", seconds }, { "ranges", ranges } };
    auto extra = nlohmann::json::parse(extraJson.empty() ? std::string("{}") : extraJson, nullptr, false);
    record["extra"] = extra.is_discarded() ? nlohmann::json::object() : extra;
    if (!isFolder(set))
        return makeError(set + " disappeared while part " + std::to_string(part) + " was written: another run "
                         "published or removed the set; run this part again if the target is not complete");
    return writeAtomically(fs::path(set) / recordName(part, parts), record.dump(1) + "\n");
}

void removeRecord(const std::string& set, unsigned part, unsigned parts)
{
    if (::unlink((fs::path(set) / recordName(part, parts)).c_str()) == 0)
        (void)syncFolder(set);
}

std::vector<unsigned> missingParts(const std::string& set, unsigned parts)
{
    std::vector<unsigned> missing;
    for (unsigned k = 0; k < parts; ++k)
        if (!pathExists(fs::path(set) / recordName(k, parts)))
            missing.push_back(k);
    return missing;
}

struct PublishClaim::Held {
    std::unique_ptr<Claim> claim;
};

PublishClaim::PublishClaim() = default;
PublishClaim::PublishClaim(PublishClaim&&) noexcept = default;
PublishClaim::~PublishClaim() = default;

Result<PublishClaim> claimPublish(const std::string& set, std::vector<std::string>& notes)
{
    auto claim = claimFinishing(set, notes);
    TESSERA_TRY(claim);
    PublishClaim held;
    if (*claim) {
        held.m_held = std::make_unique<PublishClaim::Held>();
        held.m_held->claim = std::move(*claim);
    }
    return held;
}

Status publishSet(const std::string& targetDir, const std::string& set, const std::vector<std::string>& keystones)
{
    auto staging = OutputStaging::adopt(normalTarget(targetDir).string(), (fs::path(set) / kOutFolder).string());
    TESSERA_TRY(staging);
    TESSERA_TRY(staging->publish(keystones));
    retireSet(set);
    return Status::success();
}

Result<std::uint32_t> crcOfFile(const std::string& path, std::uint64_t size, const std::function<bool()>& canceled)
{
    return crcOfRange(path, 0, size, canceled);
}

std::string outFolder(const std::string& set) { return (fs::path(set) / kOutFolder).string(); }

} // namespace parts

} // namespace tessera
