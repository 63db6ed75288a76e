// SPDX-License-Identifier: GPL-3.0-or-later
// Writing a planned GGUF file: the plain-float tensors through the merge engine (direct copies, gathers,
// conversions on every thread, bounded memory), then the quantized tensors (each assembled in its dtype and
// quantized into its ggml type's blocks with the table's quantizer, on every thread, a slab at a time) and the generated ones, then the file is published atomically.
// The same writer serves the parts of an export split across processes (merge/gguf_parts.h): each writes a
// selection of the tensors into the shared file, the last one the header and the generated tensors.

#include "formats/gguf_file.h"
#include "formats/gguf_quant.h"
#include "io/durable_file.h"
#include "merge/gguf_plan.h"
#include "publish/staged_run.h"
#include "publish/target_checks.h"
#include "parallel.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

namespace fs = std::filesystem;

namespace tessera {

namespace {


/// Reports the engine's bytes as part of the whole export (plain tensors first, quantized ones after).
class OffsetProgress : public Progress {
public:
    OffsetProgress(const MergeRunOptions& options, std::uint64_t total) : m_options(options), m_total(total) { }
    void report(std::uint64_t done, std::uint64_t, const std::string& text) override
    {
        if (m_options.progress)
            m_options.progress->report(m_base + done, m_total, text);
    }
    bool isCanceled() const override
    {
        return (m_options.progress && m_options.progress->isCanceled())
            || (m_options.cancel && m_options.cancel->load(std::memory_order_relaxed));
    }
    std::uint64_t m_base = 0;

private:
    const MergeRunOptions& m_options;
    std::uint64_t m_total;
};

bool chosen(const std::vector<bool>* selection, std::size_t i) { return !selection || (*selection)[i]; }

Status writeQuantizedAndGenerated(const GgufPlan& plan, const std::string& path, const GgufSelection& selection,
                                  const MergeRunOptions& options, OffsetProgress& progress, MergeProgress& state)
{
    std::vector<std::size_t> mine;
    for (std::size_t k = 0; k < plan.quantized.size(); ++k)
        if (chosen(selection.quantized, k))
            mine.push_back(k);
    if (mine.empty() && (!selection.finish || plan.generated.empty()))
        return Status::success();
    // Created and sized here when no streamed tensor of this run opened it first (a part of quantized tensors only);
    // never truncated, since other parts' bytes may be in it.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return makeError(path + ": cannot be opened for writing: " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer { fd };
    if (::ftruncate(fd, static_cast<off_t>(plan.fileSize)) != 0)
        return makeError(path + ": cannot be sized to " + std::to_string(plan.fileSize) + " bytes: " + std::strerror(errno));
    SourceFiles sources;
    const unsigned threads = resolveThreads(static_cast<int>(options.threads));
    auto canceled = [&] { return progress.isCanceled(); };
    // Tensors on every thread, as many at once as the memory budget of the largest one allows (a large tensor
    // runs alone, and its quantization then uses every thread itself).
    std::uint64_t largest = 0;
    for (std::size_t k : mine)
        largest = std::max(largest, plan.quantized[k].copy.bytes + plan.quantized[k].bytes);
    MemoryBudget budget(largest);
    std::mutex mutex;
    std::optional<Error> firstError;
    std::atomic<bool> failed { false };
    auto stop = [&] { return failed.load() || canceled(); };
    parallelFor(mine.size(), threads, [&](std::size_t i) {
        if (stop())
            return;
        const GgufQuantizedTensor& quantized = plan.quantized[mine[i]];
        const PlannedTensor& q = quantized.copy;
        const TensorInfo& tensor = plan.view.tensors[q.source];
        const std::uint64_t count = tensor.numel();
        const std::uint64_t outBytes = quantized.bytes;
        const std::uint64_t held = budget.acquire(q.bytes + outBytes);
        Status status = [&]() -> Status {
            auto values = PageBuffer::allocate(q.bytes);
            TESSERA_TRY(values);
            TESSERA_TRY(materializeTensor(sources, tensor, q, values->data(), stop));
            auto blocks = PageBuffer::allocate(outBytes);
            TESSERA_TRY(blocks);
            TESSERA_TRY(quantizeGgmlFrom(quantized.type, values->data(), q.dtype, count, blocks->data(), threads));
            *values = PageBuffer();
            TESSERA_TRY(writeAllAt(fd, blocks->data(), outBytes, q.fileOffset, path + ": " + tensor.name));
            startWriteback(fd, q.fileOffset, outBytes); // as the streamed tensors do: no burst at the final sync
            if (options.onTensorBytes)
                options.onTensorBytes(0, q.fileOffset, blocks->data(), outBytes);
            return Status::success();
        }();
        budget.release(held);
        std::lock_guard<std::mutex> lock(mutex);
        if (!status) {
            if (!firstError && !status.error().isCanceled())
                firstError = status.error();
            failed = true;
            return;
        }
        progress.m_base += q.bytes;
        state.bytesDone = progress.m_base;
        ++state.tensorsDone;
        state.currentTensor = tensor.name;
        progress.report(0, 0, std::to_string(state.tensorsDone) + "/" + std::to_string(state.tensorsTotal)
                                  + " tensors  " + tensor.name);
        if (options.onProgress)
            options.onProgress(state);
    });
    if (firstError)
        return *firstError;
    if (failed || canceled())
        return canceledError();
    for (const auto& g : selection.finish ? plan.generated : std::vector<GgufGeneratedTensor>())
        TESSERA_TRY(writeAllAt(fd, reinterpret_cast<const std::uint8_t*>(g.bytes.data()), g.bytes.size(), g.fileOffset,
                              path));
    if (options.sync && ::fdatasync(fd) != 0)
        return makeError(path + ": cannot be flushed to disk: " + std::strerror(errno));
    return Status::success();
}

} // namespace

Result<MergeOutcome> writeGgufTensors(const GgufPlan& plan, const std::string& dir, const GgufSelection& selection,
                                      const MergeRunOptions& options)
{
    if ((selection.plain && selection.plain->size() != plan.merge.tensors.size())
        || (selection.quantized && selection.quantized->size() != plan.quantized.size()))
        return makeError("internal: the tensor selection does not match the GGUF plan");
    // Progress counts the bytes assembled (a quantized tensor's in its dtype); bytesWritten the bytes in the file.
    std::uint64_t plainBytes = 0;
    std::size_t plainTensors = 0, tensors = 0;
    for (std::size_t i = 0; i < plan.merge.tensors.size(); ++i)
        if (chosen(selection.plain, i)) {
            plainBytes += plan.merge.tensors[i].bytes;
            ++plainTensors;
        }
    std::uint64_t total = plainBytes, fileBytes = plainBytes;
    tensors = plainTensors;
    for (std::size_t k = 0; k < plan.quantized.size(); ++k)
        if (chosen(selection.quantized, k)) {
            total += plan.quantized[k].copy.bytes;
            fileBytes += plan.quantized[k].bytes;
            ++tensors;
        }
    OffsetProgress progress(options, total);
    MergeProgress state;
    state.bytesTotal = total;
    state.tensorsTotal = tensors;
    MergeRunOptions run = options;
    run.progress = &progress;
    run.cancel = nullptr; // OffsetProgress asks the caller's flag
    run.onlyTensors = selection.plain;
    run.writeFinish = selection.finish; // the header: plan.merge's one file's
    if (options.onProgress)
        run.onProgress = [&](const MergeProgress& p) {
            MergeProgress whole = p;
            whole.bytesTotal = state.bytesTotal;
            whole.tensorsTotal = state.tensorsTotal;
            options.onProgress(whole);
        };
    auto outcome = writeMergedFiles(plan.view, plan.merge, dir, run);
    TESSERA_TRY(outcome);
    progress.m_base = plainBytes;
    state.bytesDone = plainBytes;
    state.tensorsDone = plainTensors;
    const std::string path = (fs::path(dir) / plan.fileName).string();
    TESSERA_TRY(writeQuantizedAndGenerated(plan, path, selection, options, progress, state));
    if (progress.isCanceled())
        return canceledError();
    outcome->files = plan.outputFileNames();
    outcome->bytesWritten = fileBytes;
    return outcome;
}

Result<MergeOutcome> writeGgufFile(const GgufPlan& plan, const std::string& targetDir, const MergeRunOptions& options)
{
    TESSERA_TRY(checkTarget(targetDir, plan.outputFileNames()));
    auto run = StagedRun::begin(targetDir, "GGUF export", [&] { return checkGgufTarget(plan, targetDir); },
                                options.onNote);
    TESSERA_TRY(run);
    const auto start = std::chrono::steady_clock::now();
    auto outcome = writeGgufTensors(plan, run->path(), GgufSelection {}, options);
    if (!outcome) {
        if (outcome.error().isCanceled())
            return outcome.error();
        return makeError(outcome.error().message + " (nothing was written to " + run->target()
                         + "; the temporary folder is removed)");
    }
    TESSERA_TRY(run->publish(plan.outputFileNames(), { plan.fileName }));
    MergeOutcome result;
    result.outputDir = run->target();
    result.files = plan.outputFileNames();
    result.bytesWritten = plan.fileSize;
    result.warnings = outcome->warnings;
    result.notes = run->notes();
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

} // namespace tessera
