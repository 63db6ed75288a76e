// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "io/guarded_read.h"
#include "io/mapped_file.h"
#include "model/checkpoint.h"
#include "result.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace tessera {

/// The source files of a checkpoint, mapped once and shared by every worker of a merge, test or diff.
class SourceFiles {
public:
    Result<std::shared_ptr<MappedFile>> map(const std::string& path);
    /// A read-only descriptor for copy_file_range; -1 when it cannot be opened (callers fall back to the mapping).
    int descriptor(const std::string& path);

    /// Checks the CRC-32 of the archive record holding `piece` before its bytes are used. Each record is read
    /// once, the first time any piece of it is needed, in slabs whose pages are released after use (the page
    /// cache then serves the copy that follows); callers needing a record another thread is checking wait for
    /// that result. Pieces without a checksum (safetensors) pass at once. A mismatch names file and record.
    Status verifyStorage(const Piece& piece, const std::function<bool()>& canceled = {});

    /// Runs `read` over the mapping of `path` (and of `other`, when given: a second file it reads) with a bus
    /// error turned into an error naming the file that changed: a source truncated by another process while it
    /// is read (see io/guarded_read.h for what `read` may do).
    template <typename Read>
    Status guardedRead(const std::string& path, Read&& read, const std::string& other = {})
    {
        if (runGuardedRead(read))
            return Status::success();
        return changedError(path, other);
    }
    /// The error for `path` (or `other`, whichever shrank) having changed while it was read: its size when this
    /// object first mapped or opened it, and now.
    Error changedError(const std::string& path, const std::string& other = {});

    SourceFiles() = default;
    SourceFiles(const SourceFiles&) = delete;
    SourceFiles& operator=(const SourceFiles&) = delete;
    ~SourceFiles();

private:
    enum class Check { Running, Passed, Failed };
    struct RecordState {
        Check check = Check::Running;
        Error error;
    };
    Status checkRecord(const Piece& piece, const std::function<bool()>& canceled);

    std::mutex m_mutex;
    std::condition_variable m_checked;
    std::map<std::string, std::shared_ptr<MappedFile>> m_maps;
    std::map<std::string, int> m_fds;
    std::map<std::string, std::uint64_t> m_sizes; ///< each file's size when first mapped or opened
    std::map<std::pair<std::string, std::uint64_t>, RecordState> m_records; ///< by (file, record offset)
};

} // namespace tessera
