// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "io/mapped_file.h"
#include "merge/merge_plan.h"
#include "progress.h"
#include "result.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessera {

/// Where a running merge is, reported from worker threads.
struct MergeProgress {
    std::uint64_t bytesDone = 0;
    std::uint64_t bytesTotal = 0;
    std::size_t tensorsDone = 0;
    std::size_t tensorsTotal = 0;
    std::string currentTensor;
};

/// How to run a merge.
struct MergeRunOptions {
    unsigned threads = 0;                       ///< 0 = one per core
    bool verifyReplicas = false;                ///< compare every Replica piece with the piece that is written
    bool sync = true;                           ///< fdatasync the files before publishing them
    /// Reports bytes (done, total, current tensor) and is asked isCanceled() between pieces.
    Progress* progress = nullptr;
    /// Called (serialised) whenever a piece or tensor finishes.
    std::function<void(const MergeProgress&)> onProgress;
    /// A cancel flag the workbench sets from another thread; checked between pieces.
    const std::atomic<bool>* cancel = nullptr;
};

/// What a finished merge did.
struct MergeOutcome {
    std::string outputDir;
    std::vector<std::string> files;     ///< file names written, in publish order
    std::uint64_t bytesWritten = 0;     ///< tensor bytes
    double seconds = 0;
    std::vector<std::string> warnings;  ///< e.g. a tied lm_head that differs from the embedding
};

/// The source files of a checkpoint, mapped once and shared by every worker.
class SourceFiles {
public:
    Result<std::shared_ptr<MappedFile>> map(const std::string& path);
    /// A read-only descriptor for copy_file_range; -1 when it cannot be opened (callers fall back to the mapping).
    int descriptor(const std::string& path);
    ~SourceFiles();

private:
    std::mutex m_mutex;
    std::map<std::string, std::shared_ptr<MappedFile>> m_maps;
    std::map<std::string, int> m_fds;
};

/// Assembles one tensor into `dst` (`planned.bytes` bytes, contiguous, in `planned.dtype`), whatever its mode:
/// pieces are copied run by run (converting when the dtypes differ), Partial terms summed in fp32. Source pages
/// are released after each slab, so only `dst` stays resident. `canceled` is polled between slabs.
Status materializeTensor(SourceFiles& files, const TensorInfo& tensor, const PlannedTensor& planned, std::uint8_t* dst,
                         const std::function<bool()>& canceled = {});

/// Writes the plan's files into an existing folder `dir`: each safetensors file, the index, the copied config
/// and tokenizer files. Not atomic by itself: use mergeCheckpoint() for user-facing output.
Result<MergeOutcome> writeMergedFiles(const CheckpointInfo& info, const MergePlan& plan, const std::string& dir,
                                      const MergeRunOptions& options);

/// The whole merge: checks the target (weights from another model there would be mixed with ours), the free
/// disk space, writes everything into a temporary folder next to `targetDir` and moves it into place. On any
/// error or cancel nothing is left behind and files already in `targetDir` are untouched.
Result<MergeOutcome> mergeCheckpoint(const CheckpointInfo& info, const MergePlan& plan, const std::string& targetDir,
                                     const MergeRunOptions& options);

/// Limits the bytes of tensor buffers alive at once, so memory is bounded by the largest tensor, not by the
/// number of threads. A request larger than the capacity is clamped to it (it then runs alone).
class MemoryBudget {
public:
    explicit MemoryBudget(std::uint64_t capacity);
    /// Blocks until `bytes` (clamped) are available; returns what was taken, to pass to release().
    std::uint64_t acquire(std::uint64_t bytes);
    void release(std::uint64_t bytes);

private:
    std::uint64_t m_capacity;
    std::uint64_t m_available;
    std::mutex m_mutex;
    std::condition_variable m_cv;
};

/// Anonymous memory for tensor buffers, returned to the system as soon as it is freed (malloc may keep it).
class PageBuffer {
public:
    PageBuffer() = default;
    /// Zero-filled `bytes` bytes; an error when the system refuses.
    static Result<PageBuffer> allocate(std::uint64_t bytes);
    PageBuffer(PageBuffer&& other) noexcept;
    PageBuffer& operator=(PageBuffer&& other) noexcept;
    PageBuffer(const PageBuffer&) = delete;
    PageBuffer& operator=(const PageBuffer&) = delete;
    ~PageBuffer();
    std::uint8_t* data() const { return m_data; }
    std::uint64_t size() const { return m_size; }

private:
    std::uint8_t* m_data = nullptr;
    std::uint64_t m_size = 0;
};

} // namespace tessera
