// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/training_norms.h"

#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "model/convert.h"
#include "model/coverage.h"
#include "parallel.h"

#include <algorithm>
#include <cmath>
#include <mutex>

namespace tessera {

namespace {

constexpr std::uint64_t kChunkElements = 1u << 16;

/// "exp_avg" of "state.12.exp_avg".
std::string entryName(const std::string& tensorName)
{
    const std::size_t dot = tensorName.find('.', 6);
    return dot == std::string::npos ? std::string() : tensorName.substr(dot + 1);
}

/// One tensor to sum: which row, which of its two norms, which optimizer tensor.
struct NormWork {
    std::size_t row = 0;
    bool secondMoment = false; ///< exp_avg_sq: summed as it is (Σ v = ‖√v‖²); exp_avg: its squares summed
    std::size_t tensor = 0;
};

/// Σ x² (or Σ x for the second moment) over `count` elements of `dtype` at `data`, in double, chunk by chunk.
Result<double> sumElements(const std::uint8_t* data, DType dtype, std::uint64_t count, bool squares)
{
    std::vector<double> values;
    double sum = 0;
    for (std::uint64_t first = 0; first < count; first += kChunkElements) {
        const std::uint64_t n = std::min(kChunkElements, count - first);
        values.resize(static_cast<std::size_t>(n));
        TESSERA_TRY(convertElements(data + first * dtypeSize(dtype), dtype, values.data(), DType::Float64, n));
        for (double v : values)
            sum += squares ? v * v : v;
    }
    return sum;
}

/// The tensor read whole in its own dtype (holding at most the budget), then summed; an error says why not.
Result<double> sumTensor(SourceFiles& files, const CheckpointInfo& info, const NormWork& work, MemoryBudget& budget,
                         const std::function<bool()>& canceled)
{
    const TensorInfo& t = info.tensors[work.tensor];
    if (!isFloatingPoint(t.dtype) || !canConvert(t.dtype, DType::Float64))
        return makeError("its dtype " + std::string(torchName(t.dtype)) + " is not a floating-point type");
    if (const std::string gaps = checkGaps(t); !gaps.empty())
        return makeError("incomplete: " + gaps);
    auto planned = planTensorCopy(t, work.tensor, std::nullopt);
    TESSERA_TRY(planned);
    const std::uint64_t held = budget.acquire(planned->bytes);
    Result<double> sum = 0.0;
    auto buffer = PageBuffer::allocate(std::max<std::uint64_t>(planned->bytes, 1));
    Status status = buffer ? materializeTensor(files, t, *planned, buffer->data(), canceled) : Status(buffer.error());
    if (status)
        sum = sumElements(buffer->data(), t.dtype, t.numel(), !work.secondMoment);
    buffer = PageBuffer();
    budget.release(held);
    TESSERA_TRY(status);
    return sum;
}

/// The rows in model order, each with its shape and step, and the tensors whose norms fill them.
std::vector<NormWork> planRows(const TrainingState& state, TrainingNorms& out)
{
    const CheckpointInfo& info = state.optimizer->info;
    std::vector<const ParameterState*> params;
    for (const auto& p : state.parameters)
        params.push_back(&p);
    std::stable_sort(params.begin(), params.end(), [](auto* a, auto* b) { return a->index < b->index; });
    std::vector<NormWork> work;
    for (const ParameterState* p : params) {
        ParameterNorms row;
        row.index = p->index;
        row.parameter = p->parameter.empty() ? "state." + std::to_string(p->index) : p->parameter;
        row.step = p->step;
        bool moments = false;
        for (std::size_t i : p->tensors) {
            const TensorInfo& t = info.tensors[i];
            const std::string entry = entryName(t.name);
            const bool first = entry == "exp_avg", second = entry == "exp_avg_sq";
            if ((first || row.shape.empty()) && !(t.numel() == 1 && t.placement.empty()))
                row.shape = t.shape;
            if (first || second) {
                work.push_back({ out.parameters.size(), second, i });
                moments = true;
            }
        }
        if (!moments)
            row.note = "no exp_avg or exp_avg_sq";
        out.parameters.push_back(std::move(row));
    }
    return work;
}

} // namespace

Result<TrainingNorms> computeTrainingNorms(const TrainingState& state, int threads, Progress& progress)
{
    if (!state.optimizer)
        return makeError(state.actorDir + ": no optimizer state (optim_world_size_W_rank_R.pt) to read");
    const CheckpointInfo& info = state.optimizer->info;
    TrainingNorms out;
    const std::vector<NormWork> work = planRows(state, out);
    std::uint64_t total = 0, largest = 0;
    for (const auto& w : work) {
        total += info.tensors[w.tensor].nbytes();
        largest = std::max(largest, info.tensors[w.tensor].nbytes());
    }
    SourceFiles files;
    MemoryBudget budget(std::max<std::uint64_t>(largest, 1));
    std::mutex mutex;
    std::vector<std::string> errors(work.size());
    auto canceled = [&] { return progress.isCanceled(); };
    parallelFor(work.size(), resolveThreads(threads), [&](std::size_t k) {
        if (canceled())
            return;
        const NormWork& w = work[k];
        const auto sum = sumTensor(files, info, w, budget, canceled);
        std::lock_guard<std::mutex> lock(mutex);
        ParameterNorms& row = out.parameters[w.row];
        if (sum)
            (w.secondMoment ? row.expAvgSqRootNorm : row.expAvgNorm) = std::sqrt(*sum);
        else
            errors[k] = sum.error().message;
        out.bytesRead += info.tensors[w.tensor].nbytes();
        progress.report(out.bytesRead, total, info.tensors[w.tensor].name);
    });
    if (progress.isCanceled())
        return canceledError();
    // In the state's order whatever thread finished first: the row names the parameter, the note which moment.
    for (std::size_t k = 0; k < work.size(); ++k)
        if (!errors[k].empty()) {
            std::string& note = out.parameters[work[k].row].note;
            note += (note.empty() ? "" : "; ") + entryName(info.tensors[work[k].tensor].name) + ": " + errors[k];
        }
    return out;
}

} // namespace tessera
