// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/drift.h"

#include "compare/change_kernel.h"
#include "compare/tensor_diff.h"
#include "compare/tensor_values.h"
#include "formats/scan.h"
#include "io/printable.h"
#include "model/coverage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

namespace tessera {

namespace {

/// One step as read: its checkpoint under Hugging Face names, or nothing when it could not be scanned.
struct ReadStep {
    RunStep step;
    std::optional<CheckpointInfo> info;
    std::map<std::string, int> index;   ///< tensor name → index into info->tensors
    std::unique_ptr<SourceFiles> files;
};

/// "step 30: 2 problems: …", the first few of a scan's problems.
std::string problemsText(const std::vector<Problem>& problems)
{
    constexpr std::size_t kListed = 3;
    std::string text;
    for (std::size_t i = 0; i < problems.size() && i < kListed; ++i)
        text += (i ? "; " : "") + problems[i].text();
    if (problems.size() > kListed)
        text += "; … and " + std::to_string(problems.size() - kListed) + " more";
    return text;
}

Result<std::vector<RunStep>> selectedSteps(const DriftOptions& options)
{
    auto found = findRunSteps(options.root, options.role);
    TESSERA_TRY(found);
    if (options.steps.empty())
        return found;
    std::vector<RunStep> chosen;
    for (long long wanted : std::set<long long>(options.steps.begin(), options.steps.end())) {
        const auto it = std::find_if(found->begin(), found->end(), [&](const RunStep& s) { return s.step == wanted; });
        if (it == found->end()) {
            std::string saved;
            for (const auto& s : *found)
                saved += (saved.empty() ? "" : ", ") + std::to_string(s.step);
            return makeError("step " + std::to_string(wanted) + " is not saved in " + options.root + " (saved: "
                             + saved + ")");
        }
        chosen.push_back(*it);
    }
    return chosen;
}

/// Scans one step; a step that cannot be read becomes a damaged entry, and its readable tensors still count.
ReadStep readStep(const RunStep& step, const DriftOptions& options, std::vector<DamagedStep>& damaged)
{
    ReadStep r;
    r.step = step;
    ScanOptions scan;
    scan.hfModelPath = options.hfModelPath;
    scan.threads = options.threads;
    auto info = scanCheckpoint(step.path, scan);
    if (!info) {
        damaged.push_back({ step.step, info.error().message });
        return r;
    }
    std::vector<std::string> warnings;
    auto named = withHfNames(*info, {}, &warnings);
    if (!named) {
        damaged.push_back({ step.step, named.error().message });
        return r;
    }
    if (!named->problems.empty())
        damaged.push_back({ step.step, problemsText(named->problems) });
    r.info = std::move(*named);
    for (std::size_t i = 0; i < r.info->tensors.size(); ++i)
        r.index.emplace(r.info->tensors[i].name, static_cast<int>(i));
    r.files = std::make_unique<SourceFiles>();
    return r;
}

/// What is known of the tensor as last read (TensorWalk::before reads its values again).
struct Previous {
    long long step = 0;
    Shape shape;
    bool nonFinite = false;
};

void fillChange(DriftRecord& record, const ChangeSums& sums, const std::optional<Previous>& previous)
{
    if (!record.nonFinite())
        record.norm = std::sqrt(sums.sumSquares);
    if (!previous) {
        record.why = "first step";
    } else if (previous->shape != record.shape) {
        record.why = "shape changed";
    } else if (record.nonFinite()) {
        record.why = "NaN/Inf in this step";
    } else if (previous->nonFinite) {
        record.why = "NaN/Inf in the previous step";
    } else if (sums.previousSumSquares == 0) {
        record.why = "previous norm is 0";
    } else {
        record.relativeChange = std::sqrt(sums.sumSquaredChange) / std::sqrt(sums.previousSumSquares);
        record.maxAbsChange = sums.maxAbsChange;
    }
}

/// One tensor read through every step in turn, each step compared with the last one that held it.
struct TensorWalk {
    std::vector<ReadStep>& steps;
    const DriftReport& report; ///< for the sink: its steps, tensors and damaged steps so far
    std::vector<DamagedStep>& damaged;
    Progress& progress;
    const DriftRecordSink& onRecord;
    unsigned threads = 0;
    std::uint64_t done = 0, total = 0;
    std::vector<std::vector<DriftRecord>> perStep; ///< the records, by index into `steps`
    // The step before's values, read again where its files hold them (from the page cache: the step was just read)
    // or held in memory when they had to be assembled. Nothing else of a tensor is held.
    std::optional<TensorValues> before;
    std::optional<Previous> previous;

    TensorWalk(std::vector<ReadStep>& read, DriftReport& soFar, Progress& progressOf, const DriftRecordSink& sink)
        : steps(read), report(soFar), damaged(soFar.damaged), progress(progressOf), onRecord(sink),
          perStep(read.size())
    {
    }

    Status through(const std::string& name)
    {
        previous.reset();
        before.reset();
        for (std::size_t s = 0; s < steps.size(); ++s) {
            if (!steps[s].info)
                continue;
            const auto found = steps[s].index.find(name);
            if (found == steps[s].index.end())
                continue;
            if (progress.isCanceled())
                return canceledError();
            TESSERA_TRY(atStep(s, found->second));
        }
        return Status::success();
    }

    /// Reads the tensor at `index` of step `s` and records how it moved; a failure to read it damages the step.
    Status atStep(std::size_t s, int index)
    {
        ReadStep& step = steps[s];
        const TensorInfo& tensor = step.info->tensors[static_cast<std::size_t>(index)];
        progress.report(done, total, printableText(tensor.name) + " at step " + std::to_string(step.step.step));
        done += tensor.nbytes();
        DriftRecord record;
        record.name = tensor.name;
        record.step = step.step.step;
        record.dtype = tensor.dtype;
        record.shape = tensor.outputShape();
        record.elements = tensor.numel();
        std::uint64_t missing = 0;
        missingElementMask(tensor, missing);
        if (missing > 0) // already reported with its step's problems
            return Status::success();
        if (!changeKernelReads(tensor.dtype)) {
            record.why = "not a floating-point tensor";
            keep(s, std::move(record));
            return Status::success();
        }
        const auto canceled = [&] { return progress.isCanceled(); };
        auto current = TensorValues::open(*step.files, *step.info, index, canceled);
        const bool comparable = previous && previous->shape == record.shape && before;
        std::optional<ValueSpan> beforeSpan;
        if (comparable)
            beforeSpan = before->span();
        auto sums = current ? changeSums(current->span(), beforeSpan ? &*beforeSpan : nullptr, tensor.numel(), threads)
                            : Result<ChangeSums>(current.error());
        // The checksums of the records read in place, summed on the way: no figure of a damaged record is kept.
        if (sums)
            if (const Status verified = current->verify(canceled); !verified)
                sums = verified.error();
        if (progress.isCanceled())
            return canceledError();
        if (!sums) {
            damaged.push_back({ step.step.step, printableText(tensor.name) + ": " + sums.error().message });
            return Status::success();
        }
        record.nan = sums->nan;
        record.inf = sums->inf;
        if (previous)
            record.previousStep = previous->step;
        fillChange(record, *sums, previous);
        keep(s, std::move(record));
        previous = Previous { step.step.step, tensor.outputShape(), sums->nan + sums->inf > 0 };
        before = std::move(*current);
        return Status::success();
    }

    void keep(std::size_t s, DriftRecord record)
    {
        if (onRecord)
            onRecord(report, record);
        perStep[s].push_back(std::move(record));
    }
};

} // namespace

const DriftRecord* DriftReport::find(const std::string& name, long long step) const
{
    for (const auto& r : records)
        if (r.step == step && r.name == name)
            return &r;
    return nullptr;
}

std::uint64_t DriftReport::nonFiniteRecords() const
{
    return static_cast<std::uint64_t>(
        std::count_if(records.begin(), records.end(), [](const DriftRecord& r) { return r.nonFinite(); }));
}

std::size_t DriftReport::damagedSteps() const
{
    std::set<long long> steps;
    for (const auto& d : damaged)
        steps.insert(d.step);
    return steps.size();
}

Result<DriftReport> driftRun(const DriftOptions& options, Progress& progress, const DriftRecordSink& onRecord)
{
    auto steps = selectedSteps(options);
    TESSERA_TRY(steps);
    DriftReport report;
    report.root = options.root;
    report.role = options.role;
    report.steps = *steps;

    std::vector<ReadStep> read;
    std::uint64_t total = 0;
    for (const auto& step : *steps) {
        if (progress.isCanceled())
            return canceledError();
        progress.report(0, 0, "scanning step " + std::to_string(step.step));
        read.push_back(readStep(step, options, report.damaged));
        if (!read.back().info)
            continue;
        for (const auto& t : read.back().info->tensors) {
            total += t.nbytes();
            if (std::find(report.tensors.begin(), report.tensors.end(), t.name) == report.tensors.end())
                report.tensors.push_back(t.name);
        }
    }

    // Tensor by tensor through all steps: each step's bytes are read once, and only two copies of one tensor
    // are held. Records are gathered per step, then laid out step by step.
    TensorWalk walk(read, report, progress, onRecord);
    walk.threads = static_cast<unsigned>(std::max(0, options.threads));
    walk.total = total;
    for (const auto& name : report.tensors)
        TESSERA_TRY(walk.through(name));
    progress.report(total, total, {});
    for (auto& records : walk.perStep)
        for (auto& r : records)
            report.records.push_back(std::move(r));
    std::stable_sort(report.damaged.begin(), report.damaged.end(),
                     [](const DamagedStep& x, const DamagedStep& y) { return x.step < y.step; });
    return report;
}

} // namespace tessera
