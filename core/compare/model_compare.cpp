// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/model_compare.h"

#include "io/guarded_read.h"
#include "io/printable.h"
#include "model/convert.h"
#include "merge/box_copy.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "parallel.h"
#include "formats/safetensors_reader.h"

#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

namespace tessera {

namespace {

constexpr std::uint64_t kChunkElements = 1u << 18;

/// Compares `count` elements of `dtype` at `a` (merged) and `b` (reference), accumulating into `result`.
Status compareValues(const std::uint8_t* a, const std::uint8_t* b, DType dtype, std::uint64_t count,
                     std::uint64_t firstIndex, const CompareOptions& options, TensorComparison& result,
                     std::vector<double>& da, std::vector<double>& db)
{
    const std::size_t es = dtypeSize(dtype);
    const bool exact = options.atol == 0 && options.rtol == 0;
    if (exact && std::memcmp(a, b, count * es) == 0)
        return Status::success();
    const bool floating = canConvert(dtype, DType::Float64) && isFloatingPoint(dtype);
    if (!floating) {
        for (std::uint64_t i = 0; i < count; ++i)
            if (std::memcmp(a + i * es, b + i * es, es) != 0) {
                if (result.mismatches++ == 0)
                    result.detail = "first difference at element " + std::to_string(firstIndex + i);
            }
        return Status::success();
    }
    da.resize(count);
    db.resize(count);
    TESSERA_TRY(convertElements(a, dtype, da.data(), DType::Float64, count));
    TESSERA_TRY(convertElements(b, dtype, db.data(), DType::Float64, count));
    for (std::uint64_t i = 0; i < count; ++i) {
        const double x = da[i], y = db[i];
        bool same;
        if (exact)
            same = std::memcmp(a + i * es, b + i * es, es) == 0 || (std::isnan(x) && std::isnan(y));
        else
            same = (std::isnan(x) && std::isnan(y)) || x == y
                || std::fabs(x - y) <= options.atol + options.rtol * std::fabs(y);
        if (same)
            continue;
        const double diff = std::isnan(x) || std::isnan(y) ? INFINITY : std::fabs(x - y);
        if (result.mismatches++ == 0) {
            std::ostringstream s;
            s.precision(9);
            s << "first at element " << firstIndex + i << ": merged " << x << ", reference " << y;
            result.detail = s.str();
        }
        if (diff > result.maxAbsDiff || std::isnan(result.maxAbsDiff))
            result.maxAbsDiff = diff;
    }
    return Status::success();
}

/// The largest finite |value| of `count` elements of `dtype`, read in chunks.
Result<double> largestMagnitude(const std::uint8_t* data, DType dtype, std::uint64_t count)
{
    std::vector<double> values;
    double largest = 0;
    for (std::uint64_t first = 0; first < count; first += kChunkElements) {
        const std::uint64_t n = std::min(kChunkElements, count - first);
        values.resize(n);
        TESSERA_TRY(convertElements(data + first * dtypeSize(dtype), dtype, values.data(), DType::Float64, n));
        for (double v : values)
            if (std::isfinite(v))
                largest = std::max(largest, std::fabs(v));
    }
    return largest;
}

/// The reference tensor `ref` assembled in its own dtype into `out`.
Status assembleReference(SourceFiles& files, const TensorInfo& ref, PageBuffer& out, const std::function<bool()>& canceled)
{
    auto planned = planTensorCopy(ref, 0, std::nullopt);
    TESSERA_TRY(planned);
    auto buffer = PageBuffer::allocate(std::max<std::uint64_t>(planned->bytes, 1));
    TESSERA_TRY(buffer);
    TESSERA_TRY(materializeTensor(files, ref, *planned, buffer->data(), canceled));
    out = std::move(*buffer);
    return Status::success();
}

/// How the two sides of one comparison are read.
struct ComparisonPlan {
    PlannedTensor merged;                ///< the merge's tensor, in the dtype the two are compared at
    bool roundReference = false;         ///< the reference is the wider: each chunk is rounded to merged.dtype
    const Piece* inPlace = nullptr;      ///< the reference's one piece, read where it lies; nullptr: assembled first
    std::shared_ptr<MappedFile> refFile; ///< inPlace's file
};

/// Floating dtypes of different widths (an fp32 run against a bf16 reference) compare at the narrower one, the
/// wider side rounded as torch rounds, as verl's test does by casting; equal widths must match exactly. False (and
/// `c` a DtypeMismatch) when the two cannot be compared.
bool matchDtypes(const PlannedTensor& planned, const TensorInfo& ref, TensorComparison& c, ComparisonPlan& plan)
{
    if (ref.dtype == planned.dtype)
        return true;
    const auto narrower = narrowerComparisonDtype(planned.dtype, ref.dtype);
    if (!narrower) {
        c.verdict = TensorComparison::Verdict::DtypeMismatch;
        c.detail = "dtype " + std::string(torchName(planned.dtype)) + ", reference " + std::string(torchName(ref.dtype));
        return false;
    }
    if (*narrower == ref.dtype) {
        plan.merged.dtype = ref.dtype;
        plan.merged.bytes = ref.numel() * dtypeSize(ref.dtype);
    } else {
        plan.roundReference = true;
    }
    c.note = "compared as " + std::string(torchName(plan.merged.dtype)) + ": the merge is "
        + std::string(torchName(planned.dtype)) + ", the reference " + std::string(torchName(ref.dtype));
    return true;
}

/// A reference stored as one plain piece in order (a Hugging Face folder's) is read where it lies: that piece.
/// Nullptr for any other (a GGUF file's re-indexed or Q8_0 tensors), which is assembled into a buffer of its own.
const Piece* plainReferencePiece(const TensorInfo& ref)
{
    const Piece* rp = ref.pieces.size() == 1 ? &ref.pieces.front() : nullptr;
    if (rp && (rp->encoding != PieceEncoding::Plain || rp->storedDtype != ref.dtype || rp->shape != ref.shape
               || !isContiguous(rp->shape, rp->strides)))
        rp = nullptr;
    return rp;
}

/// A LoRA-fused weight is compared within fusedTolerance × the reference's largest |value| (widening atol), and
/// the note says so.
Status widenToleranceForLora(SourceFiles& files, const TensorInfo& ref, const std::uint8_t* refBase,
                             std::uint64_t count, CompareOptions& options, TensorComparison& c)
{
    Result<double> largest = 0.0;
    Status status = files.guardedRead(ref.pieces.front().file, [&] { largest = largestMagnitude(refBase, ref.dtype, count); });
    if (status && !largest)
        status = largest.error();
    if (status) {
        const double tolerance = options.fusedTolerance * *largest;
        options.atol = std::max(options.atol, tolerance);
        std::ostringstream s;
        s.precision(3);
        s << "LoRA-fused: within " << options.fusedTolerance << " × max|w| = " << tolerance;
        c.note = c.note.empty() ? s.str() : c.note + "; " + s.str();
    }
    return status;
}

/// Compares the merge's `count` elements at `mergedBytes` with the reference's at `refBase`, chunk by chunk: a
/// reference read where it lies is copied out of its mapping under guard, a wider one rounded first.
Status compareChunks(SourceFiles& files, const ComparisonPlan& plan, const TensorInfo& ref,
                     const std::uint8_t* mergedBytes, const std::uint8_t* refBase, std::uint64_t count,
                     const CompareOptions& options, TensorComparison& c)
{
    const Piece* rp = plan.inPlace;
    const DType dtype = plan.merged.dtype;
    const std::size_t es = dtypeSize(dtype);
    const std::size_t refEs = dtypeSize(ref.dtype);
    Status status;
    std::vector<double> da, db;
    std::vector<std::uint8_t> rounded; // a chunk of the wider reference, rounded to the merge's dtype
    std::vector<std::uint8_t> mapped; // a chunk of a reference read where it lies, copied out of the mapping
    for (std::uint64_t first = 0; status && first < count; first += kChunkElements) {
        const std::uint64_t n = std::min(kChunkElements, count - first);
        const std::uint8_t* refChunk = refBase + first * refEs;
        if (rp) { // guarded: a reference truncated by another process meanwhile is an error, not a SIGBUS
            mapped.resize(static_cast<std::size_t>(n * refEs));
            status = files.guardedRead(rp->file, [&] { std::memcpy(mapped.data(), refChunk, mapped.size()); });
            refChunk = mapped.data();
        }
        if (status && plan.roundReference) {
            rounded.resize(static_cast<std::size_t>(n * es));
            status = convertElements(refChunk, ref.dtype, rounded.data(), dtype, n);
            refChunk = rounded.data();
        }
        if (status)
            status = compareValues(mergedBytes + first * es, refChunk, dtype, n, first, options, c, da, db);
        if (rp)
            plan.refFile->adviseDontNeed(rp->dataOffset + first * refEs, n * refEs);
    }
    return status;
}

/// Compares the two sides once both are readable: the merge assembled at `mergedBytes`, the reference where it lies
/// or assembled at `refBuffer`; a reference file shorter than its tensor is an error.
Status compareSides(SourceFiles& files, const ComparisonPlan& plan, const TensorInfo& ref,
                    const std::uint8_t* mergedBytes, const std::uint8_t* refBuffer, bool fused,
                    CompareOptions options, TensorComparison& c)
{
    const Piece* rp = plan.inPlace;
    const std::size_t es = dtypeSize(plan.merged.dtype);
    const std::size_t refEs = dtypeSize(ref.dtype);
    const std::uint64_t count = plan.merged.bytes / std::max<std::size_t>(es, 1);
    const std::uint8_t* refBase = rp ? plan.refFile->view().data() + rp->dataOffset : refBuffer;
    if (rp && (rp->dataOffset > plan.refFile->size() || count * refEs > plan.refFile->size() - rp->dataOffset))
        return pastEndError(rp->file, ref.name, plan.refFile->size());
    if (fused && isFloatingPoint(ref.dtype))
        TESSERA_TRY(widenToleranceForLora(files, ref, refBase, count, options, c));
    return compareChunks(files, plan, ref, mergedBytes, refBase, count, options, c);
}

/// The verdict of a comparison that ran to its end (Failed with the error, Different with a summary of the
/// mismatches), or stays Equal.
void setVerdict(TensorComparison& c, const Status& status)
{
    if (!status) {
        c.verdict = TensorComparison::Verdict::Failed;
        c.detail = status.error().message;
    } else if (c.mismatches > 0) {
        c.verdict = TensorComparison::Verdict::Different;
        std::ostringstream s;
        s.precision(6);
        s << c.mismatches << " of " << c.elements << " elements differ";
        if (c.maxAbsDiff > 0)
            s << " (max |diff| " << c.maxAbsDiff << ")";
        s << "; " << c.detail;
        c.detail = s.str();
    }
}

TensorComparison compareOne(SourceFiles& files, const CheckpointInfo& info, const PlannedTensor& planned,
                            const TensorInfo& ref, const CompareOptions& options, MemoryBudget& budget,
                            const std::function<bool()>& canceled)
{
    TensorComparison c;
    c.name = planned.name;
    c.elements = ref.numel();
    if (ref.shape != planned.shape) {
        c.verdict = TensorComparison::Verdict::ShapeMismatch;
        c.detail = "shape " + formatShape(planned.shape) + ", reference " + formatShape(ref.shape);
        return c;
    }
    ComparisonPlan plan;
    plan.merged = planned;
    if (!matchDtypes(planned, ref, c, plan))
        return c;
    plan.inPlace = plainReferencePiece(ref);
    if (plan.inPlace) {
        auto mapped = files.map(plan.inPlace->file);
        if (!mapped) {
            c.verdict = TensorComparison::Verdict::Failed;
            c.detail = mapped.error().message;
            return c;
        }
        plan.refFile = *mapped;
    }
    const std::uint64_t refHeld = plan.inPlace ? 0 : ref.nbytes();
    const std::uint64_t held = budget.acquire(plan.merged.bytes + refHeld);
    auto buffer = PageBuffer::allocate(plan.merged.bytes);
    Status status = buffer ? materializeTensor(files, info.tensors[planned.source], plan.merged, buffer->data(), canceled)
                           : Status(buffer.error());
    PageBuffer refBuffer;
    if (status && !plan.inPlace)
        status = assembleReference(files, ref, refBuffer, canceled);
    if (status)
        status = compareSides(files, plan, ref, buffer->data(), refBuffer.data(), planned.delta != nullptr, options, c);
    buffer = PageBuffer();
    refBuffer = PageBuffer();
    budget.release(held);
    setVerdict(c, status);
    return c;
}

const char* verdictName(TensorComparison::Verdict v)
{
    using V = TensorComparison::Verdict;
    switch (v) {
    case V::Equal:
        return "ok";
    case V::Different:
        return "DIFFERENT";
    case V::ShapeMismatch:
        return "SHAPE";
    case V::DtypeMismatch:
        return "DTYPE";
    case V::MissingInReference:
        return "NOT IN REFERENCE";
    case V::OnlyInReference:
        return "MISSING";
    case V::Failed:
        return "ERROR";
    }
    return "?";
}

} // namespace

std::size_t CompareReport::failures() const
{
    std::size_t n = 0;
    for (const auto& t : tensors)
        n += t.verdict == TensorComparison::Verdict::Equal ? 0 : 1;
    return n;
}

std::string CompareReport::text(bool onlyFailures) const
{
    std::ostringstream out;
    for (const auto& t : tensors) {
        if (onlyFailures && t.verdict == TensorComparison::Verdict::Equal)
            continue;
        // Names and the details quoting them come from the checkpoints: escaped, so a name cannot forge a verdict.
        out << (t.verdict == TensorComparison::Verdict::Equal ? "  ok    " : "  FAIL  ") << printableText(t.name);
        if (t.verdict != TensorComparison::Verdict::Equal)
            out << ": " << verdictName(t.verdict) << (t.detail.empty() ? "" : ": " + printableText(t.detail));
        if (!t.note.empty())
            out << " (" << printableText(t.note) << ")";
        out << "\n";
    }
    const std::size_t bad = failures();
    out << (bad ? "FAILED: " : "OK: ") << tensors.size() - bad << " of " << tensors.size() << " tensors match "
        << printableText(reference) << "\n";
    return out.str();
}

Result<CompareReport> compareWithReference(const CheckpointInfo& info, const MergePlan& plan,
                                           const std::string& referencePath, const CompareOptions& options,
                                           Progress& progress)
{
    auto reference = scanSafetensorsFolder(referencePath);
    TESSERA_TRY(reference);
    if (!reference->problems.empty()) {
        std::string message = referencePath + ": the reference model is damaged:";
        for (const auto& p : reference->problems)
            message += "\n  " + p.text();
        return makeError(message);
    }
    CompareReport report;
    report.reference = referencePath;
    std::map<std::string, const TensorInfo*> byName;
    for (const auto& t : reference->tensors)
        byName[t.name] = &t;

    report.tensors.resize(plan.tensors.size());
    SourceFiles files;
    MemoryBudget budget(plan.largestTensorBytes);
    std::atomic<std::uint64_t> done { 0 };
    std::mutex progressMutex;
    auto canceled = [&] { return progress.isCanceled(); };
    parallelFor(plan.tensors.size(), resolveThreads(static_cast<int>(options.threads)), [&](std::size_t i) {
        const PlannedTensor& planned = plan.tensors[i];
        TensorComparison& c = report.tensors[i];
        c.name = planned.name;
        if (canceled()) {
            c.verdict = TensorComparison::Verdict::Failed;
            c.detail = canceledError().message;
            return;
        }
        auto it = byName.find(planned.name);
        if (it == byName.end()) {
            if (!options.ignore.count(planned.name)) {
                c.verdict = TensorComparison::Verdict::MissingInReference;
                c.detail = "the merged model has it, the reference does not";
            }
        } else {
            c = compareOne(files, info, planned, *it->second, options, budget, canceled);
        }
        std::lock_guard<std::mutex> lock(progressMutex);
        done += planned.bytes;
        progress.report(done, plan.totalBytes, planned.name);
    });
    std::set<std::string> merged;
    for (const auto& t : plan.tensors)
        merged.insert(t.name);
    for (const auto& t : reference->tensors)
        if (!merged.count(t.name) && !options.ignore.count(t.name)) {
            TensorComparison c;
            c.name = t.name;
            c.verdict = TensorComparison::Verdict::OnlyInReference;
            c.detail = "the reference has it, the merged model does not";
            for (const auto& d : plan.dropped)
                if (d.rfind(t.name + " ", 0) == 0)
                    c.detail += " (" + d.substr(t.name.size() + 1) + ")";
            report.tensors.push_back(std::move(c));
        }
    // The merge refuses a tied head that differs from the embedding; so does the same merge run in memory.
    for (const auto& tie : plan.tieChecks) {
        const Status same = checkTiedHead(files, info, plan, tie, budget, canceled);
        if (same || same.error().isCanceled())
            continue;
        TensorComparison c;
        c.name = info.tensors[tie.dropped].name;
        c.verdict = TensorComparison::Verdict::Failed;
        c.detail = same.error().message;
        report.tensors.push_back(std::move(c));
    }
    if (progress.isCanceled())
        return canceledError();
    return report;
}

} // namespace tessera
