// SPDX-License-Identifier: GPL-3.0-or-later
// Writing a planned GGUF file: the plain-float tensors through the merge engine (direct copies, gathers,
// conversions on every thread, bounded memory), then the Q8_0 tensors one at a time (assembled in their dtype and
// quantized on every thread, a slab at a time) and the generated ones, then the file is published atomically.

#include "formats/gguf_quant.h"
#include "io/durable_file.h"
#include "merge/gguf_plan.h"
#include "merge/output_staging.h"
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

Status writeQuantizedAndGenerated(const GgufPlan& plan, const std::string& path, const MergeRunOptions& options,
                                  OffsetProgress& progress, MergeProgress& state)
{
    if (plan.quantized.empty() && plan.generated.empty())
        return Status::success();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return makeError(path + ": cannot be opened for writing: " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer { fd };
    SourceFiles sources;
    const unsigned threads = resolveThreads(static_cast<int>(options.threads));
    auto canceled = [&] { return progress.isCanceled(); };
    // Tensors on every thread, as many at once as the memory budget of the largest one allows (a large tensor
    // runs alone, and its quantization then uses every thread itself).
    std::uint64_t largest = 0;
    for (const PlannedTensor& q : plan.quantized)
        largest = std::max(largest, q.bytes + q.bytes / dtypeSize(q.dtype) / kQ8_0BlockElements * kQ8_0BlockBytes);
    MemoryBudget budget(largest);
    std::mutex mutex;
    std::optional<Error> firstError;
    std::atomic<bool> failed { false };
    auto stop = [&] { return failed.load() || canceled(); };
    parallelFor(plan.quantized.size(), threads, [&](std::size_t k) {
        if (stop())
            return;
        const PlannedTensor& q = plan.quantized[k];
        const TensorInfo& tensor = plan.view.tensors[q.source];
        const std::uint64_t count = tensor.numel();
        const std::uint64_t outBytes = count / kQ8_0BlockElements * kQ8_0BlockBytes;
        const std::uint64_t held = budget.acquire(q.bytes + outBytes);
        Status status = [&]() -> Status {
            auto values = PageBuffer::allocate(q.bytes);
            TESSERA_TRY(values);
            TESSERA_TRY(materializeTensor(sources, tensor, q, values->data(), stop));
            auto blocks = PageBuffer::allocate(outBytes);
            TESSERA_TRY(blocks);
            TESSERA_TRY(quantizeQ8_0From(values->data(), q.dtype, count, blocks->data(), threads));
            *values = PageBuffer();
            return writeAllAt(fd, blocks->data(), outBytes, q.fileOffset, path + ": " + tensor.name);
        }();
        budget.release(held);
        std::lock_guard<std::mutex> lock(mutex);
        if (!status) {
            if (!firstError && status.error().message != "canceled")
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
        return makeError("canceled");
    for (const auto& g : plan.generated)
        TESSERA_TRY(writeAllAt(fd, reinterpret_cast<const std::uint8_t*>(g.bytes.data()), g.bytes.size(), g.fileOffset,
                              path));
    if (options.sync && ::fdatasync(fd) != 0)
        return makeError(path + ": cannot be flushed to disk: " + std::strerror(errno));
    return Status::success();
}

} // namespace

Result<MergeOutcome> writeGgufFile(const GgufPlan& plan, const std::string& targetDir, const MergeRunOptions& options)
{
    TESSERA_TRY(OutputStaging::checkTarget(targetDir, { plan.fileName }));
    const auto notes = OutputStaging::removeStale(targetDir);
    if (options.onNote)
        for (const auto& note : notes)
            options.onNote(note);
    TESSERA_TRY(checkGgufTarget(plan, targetDir));
    auto staging = OutputStaging::create(targetDir);
    TESSERA_TRY(staging);
    const auto start = std::chrono::steady_clock::now();

    std::uint64_t total = plan.merge.totalBytes;
    for (const auto& q : plan.quantized)
        total += q.bytes;
    OffsetProgress progress(options, total);
    MergeProgress state;
    state.bytesTotal = total;
    state.tensorsTotal = plan.merge.tensors.size() + plan.quantized.size();
    MergeRunOptions run = options;
    run.progress = &progress;
    run.cancel = nullptr; // OffsetProgress asks the caller's flag
    if (options.onProgress)
        run.onProgress = [&](const MergeProgress& p) {
            MergeProgress whole = p;
            whole.bytesTotal = state.bytesTotal;
            whole.tensorsTotal = state.tensorsTotal;
            options.onProgress(whole);
        };
    auto outcome = writeMergedFiles(plan.view, plan.merge, staging->path(), run);
    auto fail = [&](const Error& e) -> Error {
        if (e.message == "canceled")
            return e;
        return makeError(e.message + " (nothing was written to " + staging->target() + "; the temporary folder is removed)");
    };
    if (!outcome)
        return fail(outcome.error());
    progress.m_base = plan.merge.totalBytes;
    state.bytesDone = plan.merge.totalBytes;
    state.tensorsDone = plan.merge.tensors.size();
    const std::string path = (fs::path(staging->path()) / plan.fileName).string();
    if (auto written = writeQuantizedAndGenerated(plan, path, options, progress, state); !written)
        return fail(written.error());
    if (progress.isCanceled())
        return makeError("canceled");
    TESSERA_TRY(staging->publish({ plan.fileName }));
    MergeOutcome result;
    result.outputDir = staging->target();
    result.files = { plan.fileName };
    result.bytesWritten = plan.fileSize;
    result.warnings = outcome->warnings;
    result.notes = notes;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

} // namespace tessera
