// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/source_files.h"

#include "io/crc32.h"
#include "io/zip_archive.h"
#include "merge/merge_plan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace tessera {

Result<std::shared_ptr<MappedFile>> SourceFiles::map(const std::string& path)
{
    std::lock_guard<std::mutex> lock(m_mutex);
    if (auto it = m_maps.find(path); it != m_maps.end())
        return it->second;
    auto file = MappedFile::open(path);
    TESSERA_TRY(file);
    m_maps[path] = *file;
    m_sizes.emplace(path, (*file)->size());
    return *file;
}

int SourceFiles::descriptor(const std::string& path)
{
    std::lock_guard<std::mutex> lock(m_mutex);
    if (auto it = m_fds.find(path); it != m_fds.end())
        return it->second;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    m_fds[path] = fd;
    struct stat st {};
    if (fd >= 0 && ::fstat(fd, &st) == 0)
        m_sizes.emplace(path, static_cast<std::uint64_t>(st.st_size));
    return fd;
}

Error SourceFiles::changedError(const std::string& path, const std::string& other)
{
    std::lock_guard<std::mutex> lock(m_mutex);
    auto sizeOf = [&](const std::string& p) {
        auto it = m_sizes.find(p);
        return it == m_sizes.end() ? 0 : it->second;
    };
    struct stat st {};
    if (!other.empty() && other != path && ::stat(other.c_str(), &st) == 0
        && static_cast<std::uint64_t>(st.st_size) < sizeOf(other))
        return fileChangedError(other, sizeOf(other));
    return fileChangedError(path, sizeOf(path));
}

SourceFiles::~SourceFiles()
{
    for (auto& [path, fd] : m_fds)
        if (fd >= 0)
            ::close(fd);
}

Status SourceFiles::verifyStorage(const Piece& piece, const std::function<bool()>& canceled)
{
    if (!piece.storageCrc32)
        return Status::success();
    const auto key = std::make_pair(piece.file, piece.storageBegin);
    {
        std::unique_lock<std::mutex> lock(m_mutex);
        const auto inserted = m_records.try_emplace(key); // not a structured binding: the lambda below uses it
        const auto it = inserted.first;
        if (!inserted.second) {
            m_checked.wait(lock, [&] { return it->second.check != Check::Running; });
            if (it->second.check == Check::Failed)
                return it->second.error;
            return Status::success();
        }
    }
    const Status status = checkRecord(piece, canceled);
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        RecordState& state = m_records[key];
        state.check = status ? Check::Passed : Check::Failed;
        if (!status)
            state.error = status.error();
    }
    m_checked.notify_all();
    return status;
}

Status SourceFiles::checkRecord(const Piece& piece, const std::function<bool()>& canceled)
{
    auto file = map(piece.file);
    TESSERA_TRY(file);
    const MappedFile& mapped = **file;
    if (piece.storageBegin > mapped.size() || piece.storageBytes > mapped.size() - piece.storageBegin)
        return pastEndError(piece.file, "record '" + piece.storageRecord + "'", mapped.size());
    const std::uint8_t* base = mapped.view().data() + piece.storageBegin;
    std::uint32_t crc = 0;
    for (std::uint64_t done = 0; done < piece.storageBytes;) {
        if (canceled && canceled())
            return canceledError();
        const std::uint64_t n = std::min(piece.storageBytes - done, kMergeChunkBytes);
        mapped.adviseWillNeed(piece.storageBegin + done, n);
        TESSERA_TRY(guardedRead(piece.file, [&] { crc = crc32Update(crc, base + done, static_cast<std::size_t>(n)); }));
        mapped.adviseDontNeed(piece.storageBegin + done, n);
        done += n;
    }
    if (crc != *piece.storageCrc32)
        return ZipArchive::crcMismatch(piece.file, piece.storageRecord, *piece.storageCrc32, crc);
    return Status::success();
}

} // namespace tessera
