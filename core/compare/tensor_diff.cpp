// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/tensor_diff.h"
#include "compare/tensor_values.h"
#include "compare/value_kernel.h"
#include "compare/whole_tensor.h"
#include "io/printable.h"

#include "model/convert.h"
#include "model/coverage.h"
#include "mapping/lora.h"
#include "mapping/megatron_mapping.h"
#include "merge/lora_fuse.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "parallel.h"
#include "formats/safetensors_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <queue>
#include <sstream>
#include <tuple>

namespace tessera {

namespace {

/// Values are converted to float64 this many at a time, so conversion buffers stay small (2 MB per side).
constexpr std::uint64_t kChunkElements = 1u << 18;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class ValueKind { Float, Integer, Bytes };

/// Floats and integers are read as numbers by the kernel; the rest (float8, complex) are compared by their bytes.
ValueKind valueKind(DType dtype)
{
    if (!kernelReads(dtype))
        return ValueKind::Bytes;
    return isFloatingPoint(dtype) ? ValueKind::Float : ValueKind::Integer;
}

/// How one pair of elements compares.
struct PairVerdict {
    bool differs = false;   ///< a ≠ b (NaN opposite NaN is equal)
    bool outside = false;   ///< fails allclose
    double absDiff = 0;
    double relDiff = 0;
};

PairVerdict comparePair(double x, double y, bool rawDiffers, bool exactOnly, double atol, double rtol)
{
    PairVerdict v;
    const bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn || yn) {
        v.differs = v.outside = !(xn && yn);
        v.absDiff = v.relDiff = v.differs ? kInf : 0;
        return v;
    }
    if (exactOnly ? !rawDiffers : x == y)
        return v;
    v.differs = true;
    const bool finite = std::isfinite(x) && std::isfinite(y);
    v.absDiff = finite ? std::fabs(x - y) : kInf;
    v.relDiff = finite && y != 0 ? v.absDiff / std::fabs(y) : kInf;
    // isclose(): infinities are only ever equal to themselves; integers compare exactly.
    v.outside = exactOnly || !finite || !(v.absDiff <= atol + rtol * std::fabs(y));
    return v;
}

/// The chunk's gaps: `either` is 1 where a side lacks the element (it is then not compared), `a` and `b` where that
/// side does (its own statistics leave out only those). Each null when there is no gap.
struct ChunkGaps {
    const std::uint8_t* either = nullptr;
    const std::uint8_t* a = nullptr;
    const std::uint8_t* b = nullptr;
    bool lacksA(std::uint64_t i) const { return a && a[i]; }
    bool lacksB(std::uint64_t i) const { return b && b[i]; }
};

/// A side's statistics as the row shows them.
SideStats sideStats(const SideSums& s)
{
    SideStats out;
    out.finite = s.finite;
    out.nan = s.nan;
    out.inf = s.inf;
    out.zeros = s.zeros;
    out.min = s.min;
    out.max = s.max;
    out.mean = s.mean;
    out.std = s.finite ? std::sqrt(s.m2 / static_cast<double>(s.finite)) : 0;
    return out;
}

/// The row's statistics from the kernel's sums.
void fillRow(TensorDiff& d, const ValueSums& sums)
{
    const PairSums& p = sums.pair;
    d.a = sideStats(sums.a);
    d.b = sideStats(sums.b);
    d.maxAbsDiff = p.maxAbsDiff;
    d.maxRelDiff = p.maxRelDiff;
    d.meanAbsDiff = p.finitePairs ? p.sumAbsChange / static_cast<double>(p.finitePairs) : 0;
    if (p.differing == 0 || (p.normA == 0 && p.normB == 0))
        d.cosine = 1; // exactly: rounding in the dot product must not make equal tensors look different
    else if (p.normA == 0 || p.normB == 0)
        d.cosine = 0;
    else
        d.cosine = std::clamp(p.dot / (std::sqrt(p.normA) * std::sqrt(p.normB)), -1.0, 1.0);
    d.differing = p.differing;
    d.outsideTolerance = p.outside;
    d.nanOpposite = p.nanOpposite;
    d.worstIndex = p.worst;
    d.gaps = p.gaps;
}

std::string numberText(double v)
{
    std::ostringstream s;
    s.precision(6);
    s << v;
    return s.str();
}

std::string problemsOf(const CheckpointInfo& info, const std::string& name)
{
    std::string text;
    for (const auto& p : info.problems)
        if (p.tensor == name)
            text += (text.empty() ? "" : "; ") + p.message;
    return text;
}

/// Why a side has gaps: the files it could not read (a truncated or unreadable rank), as its scan reported them;
/// empty when it reported none (a rank's file is absent).
std::string unreadableFiles(const CheckpointInfo& info)
{
    constexpr std::size_t kListed = 2;
    std::string text;
    std::size_t count = 0;
    for (const auto& p : info.problems)
        if (p.tensor.empty() && !p.file.empty() && ++count <= kListed)
            text += (text.empty() ? "" : "; ") + p.text();
    if (count > kListed)
        text += "; … and " + std::to_string(count - kListed) + " more";
    return text;
}

/// "A has no data for 512 of 4096 elements (…)" for a row with gaps: the unreadable files named when the scan
/// found them, else the rank's file is missing.
std::string incompleteText(const TensorDiff& row, const std::string& whyA, const std::string& whyB)
{
    std::string text;
    for (const auto& [side, missing, why] : { std::tuple<const char*, std::uint64_t, const std::string&> { "A", row.missingA, whyA },
                                              std::tuple<const char*, std::uint64_t, const std::string&> { "B", row.missingB, whyB } })
        if (missing)
            text += (text.empty() ? "" : "; ") + std::string(side) + " has no data for " + std::to_string(missing)
                + " of " + std::to_string(row.elements) + " elements ("
                + (why.empty() ? std::string("no piece holds them: a rank's file is missing")
                               : "a file holding them cannot be read: " + why)
                + ")";
    return text + "; they are not compared";
}

/// "compared as bfloat16: A is float32, B bfloat16", for a row rounded to the narrower of its dtypes.
std::string comparedAsText(const TensorDiff& row)
{
    return "compared as " + std::string(torchName(*row.comparedAs)) + ": A is " + std::string(torchName(row.dtypeA))
        + ", B " + std::string(torchName(row.dtypeB));
}

/// Both sides of one row, as the kernel reads them.
struct LoadedPair {
    TensorValues a, b;
    /// One byte per element, 1 where no piece of that side holds it (its gathered bytes are zeros, not data);
    /// empty for a complete side.
    std::vector<std::uint8_t> missingA, missingB;
    DType dtypeA = DType::Unknown, dtypeB = DType::Unknown; ///< as compared: the row's, or its comparedAs
    ValueKind kindA = ValueKind::Bytes, kindB = ValueKind::Bytes;
    std::string whyA, whyB; ///< for a side with gaps: the files it could not read (unreadableFiles())
    bool incomplete() const { return !missingA.empty() || !missingB.empty(); }
    bool numeric() const { return kindA != ValueKind::Bytes && kindB != ValueKind::Bytes; }
    bool exactOnly() const { return kindA == ValueKind::Integer || kindB == ValueKind::Integer; }
};

/// The dtype A is read and compared at: converted from its source as the test's merge converts it.
DType readDtypeA(const TensorDiff& row)
{
    return row.comparedAs && *row.comparedAs == row.dtypeB ? *row.comparedAs : row.dtypeA;
}

/// True when B is rounded to the narrower dtype of the pair before the comparison.
bool roundsB(const TensorDiff& row)
{
    return row.comparedAs && *row.comparedAs != row.dtypeB;
}

/// `values` of `count` elements rounded from `from` to `to` in fresh memory, as the test rounds the wider side.
Result<TensorValues> rounded(const TensorValues& values, DType from, DType to, std::uint64_t count)
{
    auto out = PageBuffer::allocate(std::max<std::uint64_t>(count * dtypeSize(to), 1));
    TESSERA_TRY(out);
    TESSERA_TRY(convertElements(values.data(), from, out->data(), to, count));
    return TensorValues::inMemory(std::move(*out), to);
}

/// Reads both sides of `row`: where they lie when `inPlace` allows and their files hold them as compared, else in
/// memory (what the detail's second pass and a byte comparison need).
Result<LoadedPair> loadPair(SourceFiles& files, const CheckpointInfo& a, const CheckpointInfo& b, TensorDiff& row,
                            const std::function<bool()>& canceled, bool inPlace)
{
    LoadedPair pair;
    pair.dtypeA = readDtypeA(row);
    pair.dtypeB = row.dtypeB;
    auto valuesA = TensorValues::open(files, a, row.indexA, canceled, pair.dtypeA, inPlace);
    if (!valuesA)
        return valuesA.error().withContext("A");
    auto valuesB = TensorValues::open(files, b, row.indexB, canceled, std::nullopt, inPlace && !roundsB(row));
    if (!valuesB)
        return valuesB.error().withContext("B");
    if (roundsB(row)) {
        valuesB = rounded(*valuesB, pair.dtypeB, *row.comparedAs, row.elements);
        TESSERA_TRY(valuesB);
        pair.dtypeB = *row.comparedAs;
    }
    pair.a = std::move(*valuesA);
    pair.b = std::move(*valuesB);
    // After the values: a mask costs a byte per element, and only for a tensor with gaps.
    pair.missingA = missingElementMask(a.tensors[static_cast<std::size_t>(row.indexA)], row.missingA);
    pair.missingB = missingElementMask(b.tensors[static_cast<std::size_t>(row.indexB)], row.missingB);
    if (!pair.missingA.empty())
        pair.whyA = unreadableFiles(a);
    if (!pair.missingB.empty())
        pair.whyB = unreadableFiles(b);
    pair.kindA = valueKind(pair.dtypeA);
    pair.kindB = valueKind(pair.dtypeB);
    return pair;
}

/// Calls fn(x, y, rawNe, gaps, n, first) over the pair's values (in memory) widened to float64, chunk by chunk.
template <typename Fn>
Status forEachChunk(const LoadedPair& pair, const TensorDiff& row, Fn&& fn, const std::function<bool()>& canceled = {})
{
    const std::size_t esA = dtypeSize(pair.dtypeA), esB = dtypeSize(pair.dtypeB);
    const bool sameType = pair.dtypeA == pair.dtypeB;
    std::vector<double> x(std::min(kChunkElements, row.elements)), y(x.size());
    std::vector<std::uint8_t> ne(pair.exactOnly() ? x.size() : 0);
    std::vector<std::uint8_t> gap(pair.incomplete() ? x.size() : 0);
    for (std::uint64_t first = 0; first < row.elements; first += kChunkElements) {
        // A chunk at a time, so that a detail no longer wanted (another row chosen, the window closed) stops now.
        if (canceled && canceled())
            return canceledError();
        const std::uint64_t n = std::min(kChunkElements, row.elements - first);
        const std::uint8_t* pa = pair.a.data() + first * esA;
        const std::uint8_t* pb = pair.b.data() + first * esB;
        toDoubles(pa, pair.dtypeA, x.data(), n);
        toDoubles(pb, pair.dtypeB, y.data(), n);
        if (!ne.empty())
            for (std::uint64_t i = 0; i < n; ++i)
                ne[i] = sameType ? std::memcmp(pa + i * esA, pb + i * esB, esA) != 0 : x[i] != y[i];
        if (!gap.empty())
            for (std::uint64_t i = 0; i < n; ++i)
                gap[i] = (!pair.missingA.empty() && pair.missingA[first + i])
                    || (!pair.missingB.empty() && pair.missingB[first + i]);
        ChunkGaps gaps;
        if (!gap.empty()) {
            gaps.either = gap.data();
            gaps.a = pair.missingA.empty() ? nullptr : pair.missingA.data() + first;
            gaps.b = pair.missingB.empty() ? nullptr : pair.missingB.data() + first;
        }
        fn(x.data(), y.data(), ne.empty() ? nullptr : ne.data(), gaps, n, first);
    }
    return Status::success();
}

/// Compares float8 and complex values by their bytes only (no float64 widening here).
void compareBytes(const LoadedPair& pair, TensorDiff& row)
{
    const std::size_t es = dtypeSize(pair.dtypeA);
    row.bitEqual = pair.dtypeA == pair.dtypeB && std::memcmp(pair.a.data(), pair.b.data(), row.elements * es) == 0;
    if (pair.dtypeA == pair.dtypeB && !row.bitEqual)
        for (std::uint64_t i = 0; i < row.elements; ++i)
            row.differing += std::memcmp(pair.a.data() + i * es, pair.b.data() + i * es, es) != 0 ? 1 : 0;
    row.outsideTolerance = row.differing;
    if (row.status == DiffStatus::Pending)
        row.status = row.bitEqual ? DiffStatus::Identical : DiffStatus::Different;
    row.detail = std::string(torchName(row.dtypeA)) + " values are compared by their bytes only";
    if (row.differing)
        row.detail = std::to_string(row.differing) + " of " + std::to_string(row.elements) + " elements differ; "
            + row.detail;
    if (pair.incomplete()) {
        row.bitEqual = false;
        row.status = DiffStatus::Incomplete;
        row.detail = incompleteText(row, pair.whyA, pair.whyB) + "; " + row.detail;
    }
}

/// Fills the statistics and the verdict of `row` from the loaded values; `keep` receives the pair's sums.
Status compareLoaded(const LoadedPair& pair, TensorDiff& row, const DiffOptions& options, PairSums* keep = nullptr,
                     const std::function<bool()>& canceled = {})
{
    row.compared = true;
    row.numeric = pair.numeric();
    if (!pair.numeric()) {
        compareBytes(pair, row);
        return Status::success();
    }
    const ValueSpan a = pair.a.span(pair.missingA.empty() ? nullptr : pair.missingA.data());
    const ValueSpan b = pair.b.span(pair.missingB.empty() ? nullptr : pair.missingB.data());
    KernelOptions kernel;
    kernel.atol = options.atol;
    kernel.rtol = options.rtol;
    kernel.threads = options.threads;
    kernel.canceled = canceled;
    auto sums = valueSums(a, &b, row.elements, kernel);
    TESSERA_TRY(sums);
    // The checksums of records read in place were summed on the way: checked before any statistic is kept.
    if (Status verified = pair.a.verify(canceled); !verified)
        return verified.error().withContext("A");
    if (Status verified = pair.b.verify(canceled); !verified)
        return verified.error().withContext("B");
    fillRow(row, *sums);
    row.bitEqual = sums->sameBytes;
    if (keep)
        *keep = sums->pair;
    std::ostringstream s;
    if (row.comparedAs)
        s << comparedAsText(row) << "; ";
    if (pair.incomplete()) {
        // The gathered bytes of a gap are zeros no rank wrote: never data, never "identical".
        row.bitEqual = false;
        row.status = DiffStatus::Incomplete;
        s << incompleteText(row, pair.whyA, pair.whyB) << "; of the " << row.comparedElements() << " elements both hold: ";
    }
    if (row.status == DiffStatus::DtypeMismatch)
        s << "dtype " << torchName(row.dtypeA) << " vs " << torchName(row.dtypeB) << "; values: ";
    if (row.bitEqual) {
        row.status = DiffStatus::Identical;
        return Status::success();
    }
    if (row.outsideTolerance > 0) {
        s << row.outsideTolerance << " of " << row.comparedElements() << " elements outside ";
        if (pair.exactOnly())
            s << "exact equality (integers)";
        else
            s << "atol " << numberText(options.atol) << ", rtol " << numberText(options.rtol);
        s << "; max |a-b| " << numberText(row.maxAbsDiff) << " at "
          << formatShape(unflattenIndex(static_cast<std::uint64_t>(row.worstIndex), row.shapeA));
    } else if (row.differing > 0) {
        s << row.differing << " of " << row.comparedElements() << " elements differ, all within tolerance";
    } else if (pair.incomplete()) {
        s << "all equal";
    } else {
        s << "equal values with different bytes (-0 vs +0, NaN bit patterns or dtype)";
    }
    if (row.status == DiffStatus::Pending)
        row.status = row.outsideTolerance > 0 ? DiffStatus::Different : DiffStatus::WithinTolerance;
    row.detail = s.str();
    return Status::success();
}

/// The memory one row's comparison holds: each side not read in place, and B's rounded copy when it is compared at
/// a narrower dtype.
std::uint64_t pairBytes(const CheckpointInfo& a, const CheckpointInfo& b, const TensorDiff& row)
{
    std::uint64_t bytes = 0;
    if (!TensorValues::readsInPlace(a, row.indexA, readDtypeA(row)))
        bytes += row.elements * dtypeSize(readDtypeA(row));
    if (roundsB(row))
        bytes += row.elements * (dtypeSize(row.dtypeB) + dtypeSize(*row.comparedAs));
    else if (!TensorValues::readsInPlace(b, row.indexB))
        bytes += row.elements * dtypeSize(row.dtypeB);
    return bytes;
}

/// Reads and compares one row; failures become the row's status.
void diffRow(SourceFiles& files, const CheckpointInfo& a, const CheckpointInfo& b, TensorDiff& row,
             const DiffOptions& options, MemoryBudget& budget, SpareThreads& spare,
             const std::function<bool()>& canceled)
{
    const std::string problems = problemsOf(a, row.name) + problemsOf(b, row.name);
    const std::uint64_t held = budget.acquire(pairBytes(a, b, row));
    auto pair = loadPair(files, a, b, row, canceled, true);
    // A gap is compared around (Incomplete); any other reported problem leaves the values untrusted.
    if (pair && !problems.empty() && !pair->incomplete())
        pair = makeError("the checkpoint reports a problem with this tensor: " + problems);
    // The blocks of the tensor on this worker's thread and on those no other worker is using now.
    DiffOptions blocks = options;
    blocks.threads = pair ? 1 + spare.take(resolveThreads(static_cast<int>(options.threads)) - 1) : 1;
    Status status = pair ? compareLoaded(*pair, row, blocks, nullptr, canceled) : Status(pair.error());
    spare.give(blocks.threads - 1);
    if (pair)
        *pair = LoadedPair(); // free the buffers before giving the budget back
    budget.release(held);
    if (!status) {
        row.status = DiffStatus::Failed;
        row.compared = row.numeric = false;
        row.detail = status.error().message;
    }
}

bool valuesComparable(const TensorDiff& row)
{
    if (row.indexA < 0 || row.indexB < 0 || row.shapeA != row.shapeB)
        return false;
    if (row.dtypeA == row.dtypeB)
        return true;
    return valueKind(row.dtypeA) != ValueKind::Bytes && valueKind(row.dtypeB) != ValueKind::Bytes;
}

/// Histogram range [lo, hi] widened when empty or a single value, so every bin has a width.
std::pair<double, double> widen(double lo, double hi)
{
    if (!(lo <= hi))
        return { -1, 1 };
    if (lo == hi) {
        const double pad = std::max(std::fabs(lo) * 0.5, 0.5);
        return { lo - pad, hi + pad };
    }
    return { lo, hi };
}

Histogram makeHistogram(double lo, double hi, int bins)
{
    Histogram h;
    std::tie(h.lo, h.hi) = widen(lo, hi);
    h.counts.assign(static_cast<std::size_t>(std::max(bins, 1)), 0.0);
    return h;
}

void addToHistogram(Histogram& h, double v)
{
    if (!std::isfinite(v))
        return;
    const double pos = (v - h.lo) / (h.hi - h.lo) * static_cast<double>(h.counts.size());
    const auto bin = static_cast<std::size_t>(std::clamp(pos, 0.0, static_cast<double>(h.counts.size() - 1)));
    h.counts[bin] += 1;
}

/// Orders worst elements: larger |a − b| first, then lower index.
struct WorseFirst {
    bool operator()(const WorstElement& l, const WorstElement& r) const
    {
        return l.absDiff > r.absDiff || (l.absDiff == r.absDiff && l.flat < r.flat);
    }
};

/// Block accumulators of the heatmap.
struct HeatmapBuilder {
    Heatmap map;
    std::vector<double> sumA, sumB;
    std::vector<std::uint64_t> countA, countB;
    std::vector<std::uint64_t> total, lackA, lackB, uncompared; ///< per cell, for a pair with gaps
    std::vector<int> colCell;       ///< source column → cell column
    std::int64_t row = 0, col = 0;  ///< source position of the next element
    int cellRow = 0;

    HeatmapBuilder(const Shape& shape, int maxCells)
    {
        const std::uint64_t numel = shapeNumel(shape);
        if (numel == 0)
            return;
        map.sourceCols = shape.empty() ? 1 : std::max<std::int64_t>(shape.back(), 1);
        map.sourceRows = static_cast<std::int64_t>(numel) / map.sourceCols;
        maxCells = std::max(maxCells, 1);
        map.rows = static_cast<int>(std::min<std::int64_t>(map.sourceRows, maxCells));
        map.cols = static_cast<int>(std::min<std::int64_t>(map.sourceCols, maxCells));
        const std::size_t cells = static_cast<std::size_t>(map.rows) * static_cast<std::size_t>(map.cols);
        sumA.assign(cells, 0);
        sumB.assign(cells, 0);
        countA.assign(cells, 0);
        countB.assign(cells, 0);
        map.absDiff.assign(cells, 0);
        colCell.resize(static_cast<std::size_t>(map.sourceCols));
        for (int c = 0; c < map.cols; ++c)
            for (std::int64_t s = map.colBegin(c); s < map.colBegin(c + 1); ++s)
                colCell[static_cast<std::size_t>(s)] = c;
    }

    /// Keeps Heatmap::missingA/B/Diff (for a pair with gaps).
    void trackMissing()
    {
        const std::size_t cells = map.absDiff.size();
        total.assign(cells, 0);
        lackA.assign(cells, 0);
        lackB.assign(cells, 0);
        uncompared.assign(cells, 0);
    }

    /// The next element, which side A or B lacks (or both): a side's value is kept where it holds it.
    void addGap(double x, double y, bool lacksA, bool lacksB)
    {
        if (map.rows == 0)
            return;
        const std::size_t at = cell();
        if (!lacksA && std::isfinite(x)) {
            sumA[at] += x;
            ++countA[at];
        }
        if (!lacksB && std::isfinite(y)) {
            sumB[at] += y;
            ++countB[at];
        }
        if (!total.empty()) {
            ++total[at];
            lackA[at] += lacksA ? 1 : 0;
            lackB[at] += lacksB ? 1 : 0;
            ++uncompared[at];
        }
        advance();
    }

    /// Elements must arrive in row-major order.
    void add(double x, double y, double absDiff)
    {
        if (map.rows == 0)
            return;
        const std::size_t at = cell();
        if (!total.empty())
            ++total[at];
        if (std::isfinite(x)) {
            sumA[at] += x;
            ++countA[at];
        }
        if (std::isfinite(y)) {
            sumB[at] += y;
            ++countB[at];
        }
        map.absDiff[at] = std::max(map.absDiff[at], absDiff);
        advance();
    }

private:
    std::size_t cell() const
    {
        return static_cast<std::size_t>(cellRow) * static_cast<std::size_t>(map.cols)
            + static_cast<std::size_t>(colCell[static_cast<std::size_t>(col)]);
    }

    void advance()
    {
        if (++col == map.sourceCols) {
            col = 0;
            ++row;
            if (cellRow + 1 < map.rows && row >= map.rowBegin(cellRow + 1))
                ++cellRow;
        }
    }

public:

    Heatmap finish()
    {
        // A cell is drawn as missing on a side only when that side holds none of its elements: a block it holds
        // in part shows the mean of what it holds.
        if (!total.empty()) {
            map.missingA.assign(total.size(), 0);
            map.missingB.assign(total.size(), 0);
            map.missingDiff.assign(total.size(), 0);
            for (std::size_t i = 0; i < total.size(); ++i) {
                map.missingA[i] = total[i] > 0 && lackA[i] == total[i] ? 1 : 0;
                map.missingB[i] = total[i] > 0 && lackB[i] == total[i] ? 1 : 0;
                map.missingDiff[i] = total[i] > 0 && uncompared[i] == total[i] ? 1 : 0;
            }
        }
        map.a.resize(sumA.size());
        map.b.resize(sumB.size());
        for (std::size_t i = 0; i < sumA.size(); ++i) {
            map.a[i] = countA[i] ? sumA[i] / static_cast<double>(countA[i]) : kNaN;
            map.b[i] = countB[i] ? sumB[i] / static_cast<double>(countB[i]) : kNaN;
        }
        return std::move(map);
    }
};

Result<TensorDiff> rowFor(const CheckpointInfo& a, const CheckpointInfo& b, const std::string& name,
                          const DiffOptions& options)
{
    for (auto& row : pairTensors(a, b, options))
        if (row.name == name) {
            if (row.indexA < 0 || row.indexB < 0)
                return makeError(printableText(name) + ": " + diffStatusName(row.status)
                                 + "; there is nothing to compare");
            if (row.shapeA != row.shapeB)
                return makeError(printableText(name) + ": shape " + formatShape(row.shapeA) + " in A, "
                                 + formatShape(row.shapeB) + " in B; values cannot be paired");
            if (!valuesComparable(row))
                return makeError(printableText(name) + ": " + std::string(torchName(row.dtypeA)) + " vs "
                                 + std::string(torchName(row.dtypeB)) + " values cannot be compared");
            return row;
        }
    return makeError(printableText(name) + ": neither checkpoint has this tensor");
}

} // namespace

const char* diffStatusName(DiffStatus status)
{
    switch (status) {
    case DiffStatus::Pending:
        return "pending";
    case DiffStatus::Identical:
        return "identical";
    case DiffStatus::WithinTolerance:
        return "within tolerance";
    case DiffStatus::Different:
        return "different";
    case DiffStatus::MissingInA:
        return "missing in A";
    case DiffStatus::MissingInB:
        return "missing in B";
    case DiffStatus::ShapeMismatch:
        return "shape mismatch";
    case DiffStatus::DtypeMismatch:
        return "dtype mismatch";
    case DiffStatus::Failed:
        return "failed";
    case DiffStatus::Incomplete:
        return "incomplete";
    }
    return "?";
}

const std::vector<DiffStatus>& reportedDiffStatuses()
{
    static const std::vector<DiffStatus> all { DiffStatus::Identical,     DiffStatus::WithinTolerance,
                                               DiffStatus::Different,     DiffStatus::MissingInA,
                                               DiffStatus::MissingInB,    DiffStatus::ShapeMismatch,
                                               DiffStatus::DtypeMismatch, DiffStatus::Incomplete,
                                               DiffStatus::Failed };
    return all;
}

bool diffStatusOk(DiffStatus status) { return status == DiffStatus::Identical || status == DiffStatus::WithinTolerance; }

std::size_t DiffReport::count(DiffStatus status) const
{
    return static_cast<std::size_t>(
        std::count_if(tensors.begin(), tensors.end(), [&](const TensorDiff& t) { return t.status == status; }));
}

std::size_t DiffReport::failures() const
{
    return static_cast<std::size_t>(
        std::count_if(tensors.begin(), tensors.end(), [](const TensorDiff& t) { return !diffStatusOk(t.status); }));
}

std::string DiffReport::summary() const
{
    std::ostringstream s;
    s << tensors.size() << (tensors.size() == 1 ? " tensor" : " tensors");
    const char* sep = ": ";
    std::vector<DiffStatus> listed = reportedDiffStatuses();
    listed.push_back(DiffStatus::Pending);
    for (auto st : listed)
        if (const std::size_t n = count(st)) {
            s << sep << n << " " << diffStatusName(st);
            sep = ", ";
        }
    double maxAbs = 0;
    for (const auto& t : tensors)
        if (t.compared)
            maxAbs = std::max(maxAbs, t.maxAbsDiff);
    s << "; max |a-b| " << numberText(maxAbs);
    return s.str();
}

std::vector<TensorDiff> pairTensors(const CheckpointInfo& a, const CheckpointInfo& b, const DiffOptions& options)
{
    // LoRA factors of a fused view are part of their weights, not tensors of the model.
    std::map<std::string, int> inB;
    for (std::size_t i = 0; i < b.tensors.size(); ++i)
        if (!b.isLoraFactor(b.tensors[i].name))
            inB.emplace(b.tensors[i].name, static_cast<int>(i));
    std::vector<TensorDiff> rows;
    rows.reserve(a.tensors.size() + b.tensors.size());
    std::map<std::string, bool> inA;
    for (std::size_t i = 0; i < a.tensors.size(); ++i) {
        const TensorInfo& t = a.tensors[i];
        if (a.isLoraFactor(t.name) || !inA.emplace(t.name, true).second)
            continue; // a duplicate name is the reader's problem to report; pair the first
        TensorDiff row;
        row.name = t.name;
        row.indexA = static_cast<int>(i);
        row.dtypeA = convertedDtype(t.dtype, options.dtypeA);
        row.shapeA = t.outputShape(); // the saved shape: the one the other side has, same element order
        auto it = inB.find(t.name);
        if (it == inB.end()) {
            row.status = DiffStatus::MissingInB;
            row.detail = "only A has this tensor";
        } else {
            const TensorInfo& u = b.tensors[static_cast<std::size_t>(it->second)];
            row.indexB = it->second;
            row.dtypeB = u.dtype;
            row.shapeB = u.outputShape();
            if (row.shapeA != row.shapeB) {
                row.status = DiffStatus::ShapeMismatch;
                row.detail = "shape " + formatShape(row.shapeA) + " in A, " + formatShape(row.shapeB) + " in B";
            } else {
                row.elements = t.numel();
                if (row.dtypeA != u.dtype && options.atNarrowerDtype)
                    row.comparedAs = narrowerComparisonDtype(row.dtypeA, u.dtype);
                if (row.comparedAs) {
                    row.detail = comparedAsText(row);
                } else if (row.dtypeA != u.dtype) {
                    row.status = DiffStatus::DtypeMismatch;
                    row.detail = "dtype " + std::string(torchName(row.dtypeA)) + " in A, "
                        + std::string(torchName(u.dtype)) + " in B";
                }
            }
        }
        rows.push_back(std::move(row));
    }
    for (std::size_t i = 0; i < b.tensors.size(); ++i) {
        const TensorInfo& u = b.tensors[i];
        if (b.isLoraFactor(u.name) || inA.count(u.name) || inB[u.name] != static_cast<int>(i))
            continue;
        TensorDiff row;
        row.name = u.name;
        row.indexB = static_cast<int>(i);
        row.dtypeB = u.dtype;
        row.shapeB = u.outputShape();
        row.status = DiffStatus::MissingInA;
        row.detail = "only B has this tensor";
        rows.push_back(std::move(row));
    }
    return rows;
}

Result<DiffReport> diffCheckpoints(const CheckpointInfo& a, const CheckpointInfo& b, const DiffOptions& options,
                                   Progress& progress, const DiffRowSink& onRow)
{
    if (!(options.atol >= 0) || !(options.rtol >= 0))
        return makeError("atol and rtol must be non-negative numbers");
    DiffReport report;
    report.pathA = a.root;
    report.pathB = b.root;
    report.atol = options.atol;
    report.rtol = options.rtol;
    report.tensors = pairTensors(a, b, options);
    report.configDifferences = compareModelConfigs(a.hfConfigDir, b.hfConfigDir);

    std::vector<std::size_t> work;
    std::uint64_t largestPair = 1;
    for (std::size_t i = 0; i < report.tensors.size(); ++i) {
        const TensorDiff& row = report.tensors[i];
        if (valuesComparable(row)) {
            work.push_back(i);
            largestPair = std::max(largestPair, pairBytes(a, b, row));
        }
    }
    const unsigned threads = resolveThreads(static_cast<int>(options.threads));
    // Memory stays within the largest pair held at once: sides read in place hold nothing, and the blocks of a
    // large tensor keep every thread busy while others wait.
    MemoryBudget budget(largestPair);
    SpareThreads spare(threads - 1);
    SourceFiles files;
    std::mutex mutex;
    std::size_t done = 0;
    const std::size_t total = report.tensors.size();
    auto canceled = [&] { return progress.isCanceled(); };
    auto finished = [&](std::size_t index) {
        std::lock_guard<std::mutex> lock(mutex);
        ++done;
        if (onRow)
            onRow(index, report.tensors[index]);
        progress.report(done, total, report.tensors[index].name);
    };
    // Rows settled by pairing alone are reported first, so a streaming view shows them at once.
    for (std::size_t i = 0; i < report.tensors.size(); ++i)
        if (!valuesComparable(report.tensors[i]))
            finished(i);
    parallelFor(work.size(), threads, [&](std::size_t w) {
        if (canceled())
            return;
        TensorDiff& row = report.tensors[work[w]];
        diffRow(files, a, b, row, options, budget, spare, canceled);
        if (!canceled())
            finished(work[w]);
    });
    if (progress.isCanceled())
        return canceledError();
    return report;
}

Result<TensorStatistics> tensorStatistics(const CheckpointInfo& checkpoint, const std::string& name, int bins,
                                          Progress& progress)
{
    int index = -1;
    for (std::size_t i = 0; i < checkpoint.tensors.size() && index < 0; ++i)
        if (checkpoint.tensors[i].name == name)
            index = static_cast<int>(i);
    if (index < 0)
        return makeError(printableText(name) + ": the checkpoint has no such tensor");
    const TensorInfo& t = checkpoint.tensors[static_cast<std::size_t>(index)];
    TensorStatistics out;
    out.name = t.name;
    out.dtype = t.dtype;
    out.shape = t.outputShape();
    out.elements = t.numel();
    SourceFiles files;
    auto canceled = [&] { return progress.isCanceled(); };
    auto buffer = readWholeTensor(files, checkpoint, index, canceled);
    TESSERA_TRY(buffer);
    const std::vector<std::uint8_t> gaps = missingElementMask(t, out.missing);
    out.numeric = valueKind(t.dtype) != ValueKind::Bytes;
    if (!out.numeric)
        return out;
    progress.report(1, 3, name);
    ValueSpan span;
    span.dtype = t.dtype;
    span.data = buffer->data();
    span.missing = gaps.empty() ? nullptr : gaps.data();
    KernelOptions kernel;
    kernel.work = KernelWork::Side;
    kernel.canceled = canceled;
    auto sums = valueSums(span, nullptr, out.elements, kernel);
    TESSERA_TRY(sums);
    out.stats = sideStats(sums->a);
    progress.report(2, 3, name);
    out.values = makeHistogram(out.stats.finite ? out.stats.min : 0, out.stats.finite ? out.stats.max : 0, bins);
    const std::size_t es = dtypeSize(t.dtype);
    std::vector<double> values(std::min(kChunkElements, out.elements));
    for (std::uint64_t first = 0; first < out.elements; first += kChunkElements) {
        if (canceled())
            return canceledError();
        const std::uint64_t n = std::min(kChunkElements, out.elements - first);
        toDoubles(buffer->data() + first * es, t.dtype, values.data(), n);
        for (std::uint64_t i = 0; i < n; ++i)
            if (gaps.empty() || !gaps[first + i])
                addToHistogram(out.values, values[i]);
    }
    progress.report(3, 3, name);
    return out;
}

Result<TensorDiffDetail> diffTensorDetail(const CheckpointInfo& a, const CheckpointInfo& b, const std::string& name,
                                          const DiffOptions& options, Progress& progress)
{
    auto found = rowFor(a, b, name, options);
    TESSERA_TRY(found);
    TensorDiffDetail detail;
    detail.summary = std::move(*found);
    TensorDiff& row = detail.summary;
    SourceFiles files;
    auto canceled = [&] { return progress.isCanceled(); };
    auto pair = loadPair(files, a, b, row, canceled, false);
    TESSERA_TRY(pair);
    if (const std::string problems = problemsOf(a, name) + problemsOf(b, name); !problems.empty() && !pair->incomplete())
        return makeError(printableText(name) + ": the checkpoint reports a problem with this tensor: " + problems);
    progress.report(1, 3, name);
    PairSums sums;
    TESSERA_TRY(compareLoaded(*pair, row, options, &sums, canceled));
    if (!pair->numeric())
        return detail; // no values to plot
    if (canceled())
        return canceledError();
    progress.report(2, 3, name);

    // Second pass, now that the ranges are known.
    const double lo = std::min(row.a.finite ? row.a.min : kInf, row.b.finite ? row.b.min : kInf);
    const double hi = std::max(row.a.finite ? row.a.max : -kInf, row.b.finite ? row.b.max : -kInf);
    detail.valuesA = makeHistogram(lo, hi, options.histogramBins);
    detail.valuesB = makeHistogram(lo, hi, options.histogramBins);
    // Symmetric around 0, so "A larger" and "B larger" read left and right of the centre.
    const double spread = std::max(std::fabs(sums.minSigned), std::fabs(sums.maxSigned));
    detail.differences = makeHistogram(-spread, spread, options.histogramBins);
    HeatmapBuilder heat(row.shapeA, options.heatmapMax);
    const std::size_t keep = static_cast<std::size_t>(std::max(options.worstCount, 0));
    std::priority_queue<WorstElement, std::vector<WorstElement>, WorseFirst> worst; // top() is the least bad kept
    const bool exactOnly = pair->exactOnly();
    if (pair->incomplete())
        heat.trackMissing();
    TESSERA_TRY(forEachChunk(*pair, row, [&](const double* x, const double* y, const std::uint8_t* ne,
                                             const ChunkGaps& gaps, std::uint64_t n, std::uint64_t first) {
        for (std::uint64_t i = 0; i < n; ++i) {
            // Each side's histogram takes every value it holds, as its statistics do.
            if (!gaps.lacksA(i))
                addToHistogram(detail.valuesA, x[i]);
            if (!gaps.lacksB(i))
                addToHistogram(detail.valuesB, y[i]);
            if (gaps.either && gaps.either[i]) {
                heat.addGap(x[i], y[i], gaps.lacksA(i), gaps.lacksB(i));
                continue;
            }
            if (std::isfinite(x[i]) && std::isfinite(y[i]))
                addToHistogram(detail.differences, x[i] - y[i]);
            const PairVerdict v = comparePair(x[i], y[i], ne && ne[i], exactOnly, options.atol, options.rtol);
            heat.add(x[i], y[i], v.differs ? v.absDiff : 0);
            if (!v.differs || keep == 0)
                continue;
            WorstElement e;
            e.flat = first + i;
            e.absDiff = v.absDiff;
            if (worst.size() < keep || WorseFirst()(e, worst.top())) {
                e.a = x[i];
                e.b = y[i];
                e.relDiff = v.relDiff;
                worst.push(e);
                if (worst.size() > keep)
                    worst.pop();
            }
        }
    }, canceled));
    detail.heatmap = heat.finish();
    while (!worst.empty()) {
        detail.worst.push_back(worst.top());
        worst.pop();
    }
    std::reverse(detail.worst.begin(), detail.worst.end());
    for (auto& e : detail.worst)
        e.index = unflattenIndex(e.flat, row.shapeA);
    progress.report(3, 3, name);
    return detail;
}

namespace {

/// A LoRA checkpoint as the model its merge writes with `reading`'s flags: the fused view (or, with no base
/// weights, the adapter), or the adapter when --lora adapter asks for it.
Result<CheckpointInfo> asMergedModel(const CheckpointInfo& checkpoint, std::vector<std::string>* warnings,
                                     const LoraReading& reading)
{
    if (!hasLoraTensors(checkpoint))
        return checkpoint;
    auto lora = readLoraCheckpoint(checkpoint, reading.settings, reading.base);
    if (!lora)
        return lora.error();
    if (warnings)
        warnings->insert(warnings->end(), lora->notes.begin(), lora->notes.end());
    if (reading.output == LoraOutput::Adapter)
        return std::move(lora->adapter);
    if (reading.output == LoraOutput::Fused && !lora->hasBase)
        return makeError(checkpoint.root + " holds only the LoRA adapter, no base weights to fuse it with: give "
                                           "--base_model DIR, or --lora adapter to compare the adapter");
    return lora->hasBase ? std::move(lora->fused) : std::move(lora->adapter);
}

} // namespace

Result<CheckpointInfo> withHfNames(const CheckpointInfo& checkpoint, const std::string& configDir,
                                   std::vector<std::string>* warnings, const LoraReading& lora)
{
    if (!isMegatronLayout(checkpoint.layout))
        return asMergedModel(checkpoint, warnings, lora);
    MappingOptions mapping;
    mapping.configDir = configDir;
    mapping.strict = false; // the diff lists missing and extra tensors itself
    auto mapped = mapMegatronToHf(checkpoint, mapping);
    if (!mapped)
        return mapped.error().withContext(checkpoint.root + ": mapping Megatron names to Hugging Face names");
    if (warnings)
        warnings->insert(warnings->end(), mapped->warnings.begin(), mapped->warnings.end());
    return asMergedModel(mapped->mapped, warnings, lora);
}

Shape unflattenIndex(std::uint64_t flat, const Shape& shape)
{
    Shape index(shape.size(), 0);
    for (std::size_t d = shape.size(); d-- > 0;) {
        const auto extent = static_cast<std::uint64_t>(std::max<std::int64_t>(shape[d], 1));
        index[d] = static_cast<std::int64_t>(flat % extent);
        flat /= extent;
    }
    return index;
}

} // namespace tessera
