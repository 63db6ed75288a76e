// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "io/mapped_file.h"
#include "merge/merge_plan.h"
#include "merge/source_files.h"
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
    /// Told about things done besides the merge (a dead run's temporary folder removed), as they happen.
    std::function<void(const std::string&)> onNote;
    /// One part of a merge split across processes (merge/merge_parts.h): when set (one flag per plan tensor),
    /// only the marked tensors are written, into files the other parts write too (created when missing, never
    /// truncated). The headers, index, side files and tie checks are written only with `writeFinish`, by the
    /// part that completes the set.
    const std::vector<bool>* onlyTensors = nullptr;
    bool writeFinish = true;
    /// Called (from worker threads, concurrently) with every block of tensor bytes written: the index of its file
    /// in MergePlan::files, its offset there and the bytes. A split merge's parts checksum what they write with it.
    std::function<void(std::size_t file, std::uint64_t offset, const std::uint8_t* data, std::uint64_t length)>
        onTensorBytes;
    /// Called once everything is written into the staging folder `dir` (holding `files`) and before it is
    /// published: writes files of its own there (e.g. a report of what was written) and returns their names, so
    /// they are published with the model, atomically.
    std::function<Result<std::vector<std::string>>(const std::string& dir, const std::vector<std::string>& files)>
        beforePublish;
};

/// True when the run was asked to stop (its Progress or its cancel flag).
bool isCanceled(const MergeRunOptions& options);

/// What a finished merge did.
struct MergeOutcome {
    std::string outputDir;
    std::vector<std::string> files;     ///< file names written, in publish order
    std::uint64_t bytesWritten = 0;     ///< tensor bytes
    double seconds = 0;
    std::vector<std::string> warnings;  ///< what the user should know of what was written
    std::vector<std::string> notes;     ///< e.g. a dead run's temporary folder removed (also sent to onNote)
};

/// Assembles one tensor into `dst` (`planned.bytes` bytes, contiguous, in `planned.dtype`), whatever its mode:
/// pieces are copied run by run (converting when the dtypes differ), Partial terms summed in fp32. Source pages
/// are released after each slab, so only `dst` stays resident. `canceled` is polled between slabs.
Status materializeTensor(SourceFiles& files, const TensorInfo& tensor, const PlannedTensor& planned, std::uint8_t* dst,
                         const std::function<bool()>& canceled = {});

/// Writes the plan's files into an existing folder `dir`: each safetensors file (its header last, so a file cut
/// short never looks complete), the index, the copied config and tokenizer files, all flushed to disk. Not atomic
/// by itself: use mergeCheckpoint() for user-facing output.
Result<MergeOutcome> writeMergedFiles(const CheckpointInfo& info, const MergePlan& plan, const std::string& dir,
                                      const MergeRunOptions& options);

class MemoryBudget;

/// Checks a tied lm_head the plan drops (`tie`) against the embedding that replaces it: an error when it differs,
/// since it was trained on its own and would be lost, saying what to do. The merge runs it before publishing, and
/// `tessera test` as part of the same merge.
Status checkTiedHead(SourceFiles& files, const CheckpointInfo& info, const MergePlan& plan, const TieCheck& tie,
                     MemoryBudget& budget, const std::function<bool()>& canceled);

/// Refuses, before anything is written, a target the merge cannot complete: not a folder, not writable, a final
/// name taken by a folder, weight files or config and tokenizer files of another model there that it would not
/// replace, or too little free disk. --dry-run uses it too.
Status checkMergeTarget(const MergePlan& plan, const std::string& targetDir);

/// The whole merge: checks the target (checkMergeTarget()), removes temporary folders dead runs left for it,
/// writes everything into a hidden temporary folder (see OutputStaging) and publishes it when complete. On any
/// error, cancel or kill the target is left as it was; files of other names in it are never touched.
Result<MergeOutcome> mergeCheckpoint(const CheckpointInfo& info, const MergePlan& plan, const std::string& targetDir,
                                     const MergeRunOptions& options);

/// One model a merge writes, and where: `subfolder` of the target ("" = the target itself), e.g. a LoRA merge's
/// fused model in the target and its adapter in lora_adapter/.
struct MergeOutput {
    const CheckpointInfo* info = nullptr;
    const MergePlan* plan = nullptr;
    std::string subfolder;
};

/// The folders a merge reads: each checkpoint, its config folder and every folder its tensors' files lie in.
std::vector<std::string> mergeSourceFolders(const std::vector<MergeOutput>& outputs);

/// checkMergeTarget() for several models: the target apart from every folder the merge reads, the top-level
/// model against the target, each sub-folder's against what is already in it, and the disk for all of them.
/// --dry-run uses it too.
Status checkMergeTargets(const std::vector<MergeOutput>& outputs, const std::string& targetDir);

/// mergeCheckpoint() for several models published together: all of them appear at once, or none. A sub-folder
/// that already exists in the target is replaced only when it holds nothing but files of the same names.
Result<MergeOutcome> mergeCheckpoints(const std::vector<MergeOutput>& outputs, const std::string& targetDir,
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
