// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/value_kernel.h"

// The lanes take and return 32-byte vectors in always-inlined functions; they never cross a call, so the warning
// that such calls pass them differently with and without AVX (GCC's and clang's) concerns nothing here.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "compare/value_lanes.h"
#include "io/cpu_features.h"
#include "model/convert.h"
#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera {

namespace {

using namespace lanes;

/// Elements widened to float64 at a time: two 8 KiB buffers, which stay in the L1 cache for the second pass.
constexpr std::uint64_t kChunk = 1024;
/// Elements per block handed to a thread: the unit the result's order is fixed by.
constexpr std::uint64_t kBlock = 1u << 16;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kMagnitude = 0x7FFFFFFFFFFFFFFF; ///< every bit but the sign

template <typename V>
TESSERA_LANES typename V::Lanes absolute(const typename V::Lanes& x)
{
    using Mask = typename V::Mask;
    return bitCast<typename V::Lanes>(bitCast<Mask>(x) & broadcast<Mask>(kMagnitude));
}

/// Lanes whose byte at `p` is not 0 (a gap mask, or integers' differing bytes).
template <typename V>
TESSERA_LANES typename V::Mask flagged(const std::uint8_t* p)
{
    const std::int64_t m[kLanes] = { p[0] ? -1 : 0, p[1] ? -1 : 0, p[2] ? -1 : 0, p[3] ? -1 : 0 };
    return load<typename V::Mask>(m);
}

/// The lanes of `x` that are finite and held (not in a gap): with the sign bit masked off, below infinity. NaN and
/// ±Inf are rare: a chunk holding any is looked at again element by element (nonFiniteOf()).
template <typename V>
TESSERA_LANES typename V::Mask finiteLanes(const typename V::Lanes& x, const typename V::Mask& held)
{
    return (absolute<V>(x) < broadcast<typename V::Lanes>(kInf)) & held;
}

/// One side's running sums, lane by lane (a true lane of a Mask is −1: counts subtract it). The extremes take every
/// held lane as it is (an infinity too, a NaN never compares): a chunk holding a non-finite value has them again.
template <typename V>
struct SideLanes {
    using Lanes = typename V::Lanes;
    using Mask = typename V::Mask;
    Lanes sumSquares = broadcast<Lanes>(0.0), sum = broadcast<Lanes>(0.0);
    Lanes min = broadcast<Lanes>(kInf), max = broadcast<Lanes>(-kInf);
    Mask finite = broadcast<Mask>(std::int64_t(0)), zeros = finite;
};

template <typename V, KernelWork W, bool Gaps>
TESSERA_LANES void addSide(SideLanes<V>& s, const typename V::Lanes& x, const typename V::Mask& finite,
                           const typename V::Mask& held)
{
    using Lanes = typename V::Lanes;
    const Lanes zero = broadcast<Lanes>(0.0);
    const Lanes v = select(finite, x, zero);
    s.finite -= finite;
    s.sumSquares += v * v;
    if constexpr (W != KernelWork::Change) {
        s.sum += v;
        s.zeros -= (x == zero) & held;
        const Lanes low = Gaps ? select(held, x, broadcast<Lanes>(kInf)) : x;
        const Lanes high = Gaps ? select(held, x, broadcast<Lanes>(-kInf)) : x;
        s.min = select(low < s.min, low, s.min);
        s.max = select(high > s.max, high, s.max);
    }
}

/// The pair's running sums, lane by lane.
template <typename V>
struct PairLanes {
    using Lanes = typename V::Lanes;
    using Mask = typename V::Mask;
    Lanes sumSquaredChange = broadcast<Lanes>(0.0), maxAbsChange = sumSquaredChange;
    Lanes dot = sumSquaredChange, normA = dot, normB = dot, sumAbsChange = dot, maxRel = dot;
    Lanes minSigned = broadcast<Lanes>(kInf), maxSigned = broadcast<Lanes>(-kInf), worstAbs = broadcast<Lanes>(-1.0);
    Mask finitePairs = broadcast<Mask>(std::int64_t(0)), differing = finitePairs, outside = finitePairs;
    Mask nanOpposite = finitePairs, worst = broadcast<Mask>(std::int64_t(-1));
};

/// What the pair lanes compare by.
template <typename V>
struct PairRules {
    typename V::Lanes atol, rtol;
    bool exact = false; ///< integers: equality by their bytes (`ne`), no tolerance
};

template <typename V, KernelWork W>
TESSERA_LANES void addPair(PairLanes<V>& p, const typename V::Lanes& x, const typename V::Lanes& y,
                           const typename V::Mask& finiteA, const typename V::Mask& finiteB,
                           const typename V::Mask& heldA, const typename V::Mask& heldB, const typename V::Mask& ne,
                           const typename V::Mask& index, const PairRules<V>& rules)
{
    using Lanes = typename V::Lanes;
    using Mask = typename V::Mask;
    const Lanes zero = broadcast<Lanes>(0.0), inf = broadcast<Lanes>(kInf);
    const Mask both = finiteA & finiteB;
    const Lanes d = x - y;
    const Lanes change = select(both, d, zero);
    const Lanes magnitude = absolute<V>(change);
    p.sumSquaredChange += change * change;
    p.maxAbsChange = select(magnitude > p.maxAbsChange, magnitude, p.maxAbsChange);
    if constexpr (W == KernelWork::Diff) {
        p.finitePairs -= both;
        p.dot += select(both, x * y, zero);
        p.normA += select(both, x * x, zero);
        p.normB += select(both, y * y, zero);
        p.sumAbsChange += magnitude;
        p.minSigned = select(both & (d < p.minSigned), d, p.minSigned);
        p.maxSigned = select(both & (d > p.maxSigned), d, p.maxSigned);
        const Mask held = heldA & heldB, nanA = x != x, nanB = y != y;
        const Mask differs = (rules.exact ? ne : (x != y) & ~(nanA & nanB)) & held;
        p.differing -= differs;
        p.nanOpposite -= (nanA ^ nanB) & held;
        const Lanes ay = absolute<V>(y);
        // isclose(): infinities are only ever equal to themselves; integers compare exactly.
        const Mask within = both & (magnitude <= rules.atol + rules.rtol * ay);
        p.outside -= rules.exact ? differs : differs & ~within;
        const Lanes rel = select(both & (y != zero), magnitude / ay, inf);
        p.maxRel = select(differs & (rel > p.maxRel), rel, p.maxRel);
        const Lanes gap = select(both, magnitude, inf);
        const Mask worse = differs & (gap > p.worstAbs);
        p.worstAbs = select(worse, gap, p.worstAbs);
        p.worst = select(worse, index, p.worst);
    }
}

/// One chunk's widened values: `x` (A) and `y` (B), with the chunk's gap bytes of each side (with gaps) and, for
/// integers, whether each element's bytes differ.
struct Chunk {
    const double* x = nullptr;
    const double* y = nullptr;
    const std::uint8_t* missingA = nullptr;
    const std::uint8_t* missingB = nullptr;
    const std::uint8_t* ne = nullptr;
    std::uint64_t count = 0; ///< a multiple of kLanes
    std::uint64_t first = 0; ///< flat index of element 0
};

/// The first pass over a chunk: every lane sum of A (and with `Pair`, of B and of the pair). With `Gaps`, lanes a
/// side lacks are left out of its sums, and out of the pair's.
template <typename V, KernelWork W, bool Pair, bool Gaps>
TESSERA_LANES void chunkLanes(const Chunk& c, const PairRules<V>& rules, SideLanes<V>& sa, SideLanes<V>& sb,
                              PairLanes<V>& p)
{
    using Lanes = typename V::Lanes;
    using Mask = typename V::Mask;
    const Mask all = broadcast<Mask>(std::int64_t(-1)), step = broadcast<Mask>(std::int64_t(kLanes));
    const std::int64_t first = static_cast<std::int64_t>(c.first);
    const std::int64_t firstLanes[kLanes] = { first, first + 1, first + 2, first + 3 };
    Mask index = load<Mask>(firstLanes);
    for (std::uint64_t i = 0; i < c.count; i += kLanes, index += step) {
        const Mask heldA = Gaps ? ~flagged<V>(c.missingA + i) : all;
        const Lanes x = load<Lanes>(c.x + i);
        const Mask finiteA = finiteLanes<V>(x, heldA);
        addSide<V, W, Gaps>(sa, x, finiteA, heldA);
        if constexpr (Pair) {
            const Mask heldB = Gaps ? ~flagged<V>(c.missingB + i) : all;
            const Lanes y = load<Lanes>(c.y + i);
            const Mask finiteB = finiteLanes<V>(y, heldB);
            addSide<V, W, Gaps>(sb, y, finiteB, heldB);
            const Mask ne = W == KernelWork::Diff && rules.exact ? flagged<V>(c.ne + i) : ~all;
            addPair<V, W>(p, x, y, finiteA, finiteB, heldA, heldB, ne, index, rules);
        }
    }
}

/// The second pass over one side of a chunk: Σ (x − mean)² over its finite held elements, in two sets of lanes (the
/// first takes the even groups of four, the second the odd), so that two additions are in flight at once. `Masked`
/// when the chunk has gaps or non-finite values.
template <typename V, bool Masked>
TESSERA_LANES typename V::Lanes centeredSquare(const double* x, const std::uint8_t* missing, std::uint64_t i,
                                               const typename V::Lanes& mean)
{
    using Lanes = typename V::Lanes;
    const Lanes v = load<Lanes>(x + i);
    Lanes d = v - mean;
    if constexpr (Masked) {
        const auto held = missing ? ~flagged<V>(missing + i) : broadcast<typename V::Mask>(std::int64_t(-1));
        d = select(finiteLanes<V>(v, held), d, broadcast<Lanes>(0.0));
    }
    return d * d;
}

template <typename V, bool Masked>
TESSERA_LANES double centeredSum(const double* x, const std::uint8_t* missing, std::uint64_t count, double mean)
{
    using Lanes = typename V::Lanes;
    const Lanes m = broadcast<Lanes>(mean);
    Lanes even = broadcast<Lanes>(0.0), odd = even;
    std::uint64_t i = 0;
    for (; i + 2 * kLanes <= count; i += 2 * kLanes) {
        even += centeredSquare<V, Masked>(x, missing, i, m);
        odd += centeredSquare<V, Masked>(x, missing, i + kLanes, m);
    }
    if (i < count)
        even += centeredSquare<V, Masked>(x, missing, i, m);
    double l[kLanes];
    store(even + odd, l);
    return (l[0] + l[1]) + (l[2] + l[3]);
}

// Lanes are reduced by plain code both entry points share, sums in one fixed order: (l0 + l1) + (l2 + l3).
double laneSum(const double (&l)[kLanes]) { return (l[0] + l[1]) + (l[2] + l[3]); }
std::uint64_t laneCount(const std::int64_t (&l)[kLanes]) { return static_cast<std::uint64_t>((l[0] + l[1]) + (l[2] + l[3])); }
double laneMin(const double (&l)[kLanes])
{
    double m = l[0];
    for (std::uint64_t i = 1; i < kLanes; ++i)
        m = l[i] < m ? l[i] : m;
    return m;
}
double laneMax(const double (&l)[kLanes])
{
    double m = l[0];
    for (std::uint64_t i = 1; i < kLanes; ++i)
        m = l[i] > m ? l[i] : m;
    return m;
}

/// Reduces vector lanes: `sum(v)`, `count(m)`… on the lanes stored as arrays.
struct Reduce {
    template <typename T>
    static double sum(const T& v) { double l[kLanes]; store(v, l); return laneSum(l); }
    template <typename T>
    static double min(const T& v) { double l[kLanes]; store(v, l); return laneMin(l); }
    template <typename T>
    static double max(const T& v) { double l[kLanes]; store(v, l); return laneMax(l); }
    template <typename T>
    static std::uint64_t count(const T& m) { std::int64_t l[kLanes]; store(m, l); return laneCount(l); }
};

/// A chunk whose finite values are fewer than those it holds: its NaN and ±Inf counted, and with `extremes` its
/// minimum and maximum taken again over its finite values, element by element.
void nonFiniteOf(const double* x, const std::uint8_t* missing, std::uint64_t count, bool extremes, SideSums& s)
{
    bool any = false;
    for (std::uint64_t i = 0; i < count; ++i) {
        const double v = x[i];
        if (missing && missing[i])
            continue;
        if (v != v) {
            ++s.nan;
        } else if (v == kInf || v == -kInf) {
            ++s.inf;
        } else if (extremes) {
            s.min = !any || v < s.min ? v : s.min;
            s.max = !any || v > s.max ? v : s.max;
            any = true;
        }
    }
}

/// One side's sums of a chunk from its lanes; Side and Diff work add the second pass, Σ (x − mean)².
template <typename V, KernelWork W, bool Gaps>
TESSERA_LANES SideSums sideSumsOf(const SideLanes<V>& lanes, const double* x, const std::uint8_t* missing,
                                  std::uint64_t count)
{
    SideSums s;
    s.finite = Reduce::count(lanes.finite);
    s.sumSquares = Reduce::sum(lanes.sumSquares);
    std::uint64_t held = count;
    for (std::uint64_t i = 0; Gaps && i < count; ++i)
        held -= missing[i] ? 1 : 0;
    const bool clean = s.finite == held;
    if (!clean)
        nonFiniteOf(x, Gaps ? missing : nullptr, count, W != KernelWork::Change, s);
    if (W == KernelWork::Change || s.finite == 0)
        return s;
    s.zeros = Reduce::count(lanes.zeros);
    if (clean) {
        s.min = Reduce::min(lanes.min);
        s.max = Reduce::max(lanes.max);
    }
    s.mean = Reduce::sum(lanes.sum) / static_cast<double>(s.finite);
    s.m2 = clean && !Gaps ? centeredSum<V, false>(x, nullptr, count, s.mean)
                          : centeredSum<V, true>(x, Gaps ? missing : nullptr, count, s.mean);
    return s;
}

/// The pair's sums of a chunk from its lanes; the worst element is the first lane's of the largest |x − y|, the
/// lowest index on a tie.
template <typename V>
TESSERA_LANES PairSums pairSumsOf(const PairLanes<V>& p)
{
    PairSums out;
    out.finitePairs = Reduce::count(p.finitePairs);
    out.dot = Reduce::sum(p.dot);
    out.normA = Reduce::sum(p.normA);
    out.normB = Reduce::sum(p.normB);
    out.sumSquaredChange = Reduce::sum(p.sumSquaredChange);
    out.sumAbsChange = Reduce::sum(p.sumAbsChange);
    out.maxAbsChange = Reduce::max(p.maxAbsChange);
    if (out.finitePairs) {
        out.minSigned = Reduce::min(p.minSigned);
        out.maxSigned = Reduce::max(p.maxSigned);
    }
    out.differing = Reduce::count(p.differing);
    out.outside = Reduce::count(p.outside);
    out.nanOpposite = Reduce::count(p.nanOpposite);
    out.maxRelDiff = Reduce::max(p.maxRel);
    double worstAbs[kLanes];
    std::int64_t worst[kLanes];
    store(p.worstAbs, worstAbs);
    store(p.worst, worst);
    for (std::uint64_t i = 0; i < kLanes; ++i)
        if (worst[i] >= 0
            && (out.worst < 0 || worstAbs[i] > out.maxAbsDiff
                || (worstAbs[i] == out.maxAbsDiff && worst[i] < out.worst))) {
            out.worst = worst[i];
            out.maxAbsDiff = worstAbs[i];
        }
    return out;
}

/// The pair's sums of a chunk whose bytes are equal on both sides: what the pair lanes give for x = y (the same
/// lanes, in the same order, as A's Σ x²), without running them.
PairSums pairOfEqual(const SideSums& a)
{
    PairSums p;
    p.finitePairs = a.finite;
    p.dot = p.normA = p.normB = a.sumSquares;
    return p;
}

/// Widens `count` elements to float64.
using Widen = void (*)(const std::uint8_t* src, DType dtype, double* dst, std::uint64_t count);

template <typename T>
void widenIntegers(const std::uint8_t* src, double* dst, std::uint64_t count)
{
    for (std::uint64_t i = 0; i < count; ++i) {
        T v;
        std::memcpy(&v, src + i * sizeof(T), sizeof(T));
        dst[i] = static_cast<double>(v);
    }
}

void widenPortable(const std::uint8_t* src, DType dtype, double* dst, std::uint64_t count)
{
    switch (dtype) {
    case DType::Bool:
        for (std::uint64_t i = 0; i < count; ++i)
            dst[i] = src[i] ? 1.0 : 0.0;
        break;
    case DType::UInt8:
        widenIntegers<std::uint8_t>(src, dst, count);
        break;
    case DType::Int8:
        widenIntegers<std::int8_t>(src, dst, count);
        break;
    case DType::Int16:
        widenIntegers<std::int16_t>(src, dst, count);
        break;
    case DType::UInt16:
        widenIntegers<std::uint16_t>(src, dst, count);
        break;
    case DType::Int32:
        widenIntegers<std::int32_t>(src, dst, count);
        break;
    case DType::UInt32:
        widenIntegers<std::uint32_t>(src, dst, count);
        break;
    case DType::Int64:
        widenIntegers<std::int64_t>(src, dst, count);
        break;
    case DType::UInt64:
        widenIntegers<std::uint64_t>(src, dst, count);
        break;
    default: // the floating dtypes, checked by valueSums(): exact, as torch widens them
        (void)convertElements(src, dtype, dst, DType::Float64, count);
        break;
    }
}

#if defined(__x86_64__)
/// bfloat16 is the top half of a float32; float16 converts with F16C; float32 widens exactly. Eight at a time.
__attribute__((target("avx2,f16c"))) void widenAvx2(const std::uint8_t* src, DType dtype, double* dst,
                                                    std::uint64_t count)
{
    std::uint64_t i = 0;
    const bool half = dtype == DType::BFloat16 || dtype == DType::Float16;
    if (half || dtype == DType::Float32) {
        for (; i + 8 <= count; i += 8) {
            __m256 f;
            if (dtype == DType::Float32) {
                f = _mm256_loadu_ps(reinterpret_cast<const float*>(src + i * 4));
            } else {
                const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * 2));
                f = dtype == DType::Float16 ? _mm256_cvtph_ps(h)
                                            : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
            }
            _mm256_storeu_pd(dst + i, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
            _mm256_storeu_pd(dst + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
        }
    }
    widenPortable(src + i * dtypeSize(dtype), dtype, dst + i, count - i);
}
#endif

/// One block's work: its side(s), in memory, and how to compare them.
struct BlockJob {
    const std::uint8_t* a = nullptr;     ///< the block's first element of A
    const std::uint8_t* b = nullptr;     ///< of B, null for Side work
    DType dtypeA = DType::Unknown, dtypeB = DType::Unknown;
    const std::uint8_t* missingA = nullptr; ///< the whole tensor's gap bytes
    const std::uint8_t* missingB = nullptr;
    bool exact = false;                  ///< integers on a side: equality by their bytes
    bool skipEqual = false;
    double atol = 0, rtol = 0;
    std::uint64_t first = 0;             ///< the block's first element
    std::uint64_t count = 0;
};

/// How many elements of [first, first + n) either side lacks.
std::uint64_t gapsIn(const BlockJob& job, std::uint64_t first, std::uint64_t n)
{
    std::uint64_t gaps = 0;
    for (std::uint64_t i = first; i < first + n; ++i)
        gaps += (job.missingA && job.missingA[i]) || (job.missingB && job.missingB[i]) ? 1 : 0;
    return gaps;
}

/// Sums one chunk (widened into c.x and c.y, padded to whole lanes) with the lanes for work W, and merges it into
/// `out`: A alone, or with `Pair` both sides and the pair. A chunk of a pair summed without `Pair` has equal bytes
/// on both sides: B's sums are then A's, and the pair's follow from them.
template <typename V, KernelWork W, bool Pair, bool Gaps>
TESSERA_LANES void sumChunk(const BlockJob& job, const Chunk& c, std::uint64_t n, ValueSums& out)
{
    PairRules<V> rules;
    rules.atol = broadcast<typename V::Lanes>(job.atol);
    rules.rtol = broadcast<typename V::Lanes>(job.rtol);
    rules.exact = job.exact;
    SideLanes<V> sa, sb;
    PairLanes<V> p;
    chunkLanes<V, W, Pair, Gaps>(c, rules, sa, sb, p);
    const SideSums a = sideSumsOf<V, W, Gaps>(sa, c.x, c.missingA, c.count);
    out.a.merge(a);
    if constexpr (Pair) {
        out.b.merge(sideSumsOf<V, W, Gaps>(sb, c.y, c.missingB, c.count));
        PairSums pair = pairSumsOf<V>(p);
        pair.gaps = Gaps ? gapsIn(job, c.first, n) : 0;
        out.pair.merge(pair);
    } else if (job.b) {
        out.b.merge(a);
        out.pair.merge(pairOfEqual(a));
    }
}

template <typename V, KernelWork W, bool Pair>
TESSERA_LANES void sumChunk(const BlockJob& job, const Chunk& c, std::uint64_t n, bool gaps, ValueSums& out)
{
    if (gaps)
        sumChunk<V, W, Pair, true>(job, c, n, out);
    else
        sumChunk<V, W, Pair, false>(job, c, n, out);
}

/// Widens B's chunk beside A's, with whether each integer element's bytes differ.
void widenSecond(const BlockJob& job, const std::uint8_t* pa, const std::uint8_t* pb, std::uint64_t n,
                 std::uint64_t padded, Widen widen, const double* x, double* y, std::uint8_t* ne)
{
    widen(pb, job.dtypeB, y, n);
    std::fill(y + n, y + padded, 0.0);
    if (!job.exact)
        return;
    const std::size_t es = dtypeSize(job.dtypeA);
    for (std::uint64_t i = 0; i < n; ++i)
        ne[i] = job.dtypeA == job.dtypeB ? std::memcmp(pa + i * es, pb + i * es, es) != 0 : x[i] != y[i];
    std::fill(ne + n, ne + padded, std::uint8_t(0));
}

/// The chunk's gap bytes of each side, its padding (past `n`) a gap of both.
void chunkGaps(const BlockJob& job, std::uint64_t first, std::uint64_t n, std::uint64_t padded,
               std::uint8_t* missingA, std::uint8_t* missingB)
{
    for (std::uint64_t i = 0; i < padded; ++i) {
        missingA[i] = i >= n || (job.missingA && job.missingA[first + i]);
        missingB[i] = i >= n || (job.missingB && job.missingB[first + i]);
    }
}

/// One block: its chunks widened, summed lane by lane, reduced and merged in order.
template <typename V, KernelWork W>
TESSERA_LANES ValueSums blockSums(const BlockJob& job, Widen widen)
{
    alignas(32) double x[kChunk], y[kChunk];
    alignas(32) std::uint8_t missingA[kChunk], missingB[kChunk], ne[kChunk];
    const std::size_t esA = dtypeSize(job.dtypeA), esB = dtypeSize(job.dtypeB);
    const bool anyGaps = job.missingA || job.missingB;
    ValueSums out;
    out.sameBytes = job.b && job.dtypeA == job.dtypeB;
    for (std::uint64_t done = 0; done < job.count; done += kChunk) {
        const std::uint64_t first = job.first + done, n = std::min(kChunk, job.count - done);
        // The tensor's last chunk may end inside a group of lanes: its padding is a gap of both sides.
        const std::uint64_t padded = (n + kLanes - 1) / kLanes * kLanes;
        const bool gaps = anyGaps || padded != n;
        const std::uint8_t* pa = job.a + done * esA;
        const std::uint8_t* pb = job.b ? job.b + done * esB : nullptr;
        const Chunk c { x, y, gaps ? missingA : nullptr, gaps ? missingB : nullptr, job.exact ? ne : nullptr, padded,
                        first };
        widen(pa, job.dtypeA, x, n);
        std::fill(x + n, x + padded, 0.0);
        if (gaps)
            chunkGaps(job, first, n, padded, missingA, missingB);
        // memcmp stops at the first byte that differs: cheap where the chunks differ, and equal ones are summed once.
        const bool equal = pb && job.dtypeA == job.dtypeB && std::memcmp(pa, pb, n * esA) == 0;
        out.sameBytes = out.sameBytes && equal;
        if (!pb || (job.skipEqual && equal && !gaps)) {
            sumChunk<V, W, false>(job, c, n, gaps, out);
            continue;
        }
        widenSecond(job, pa, pb, n, padded, widen, x, y, ne);
        sumChunk<V, W, true>(job, c, n, gaps, out);
    }
    return out;
}

template <typename V>
TESSERA_LANES ValueSums blockSumsFor(const BlockJob& job, KernelWork work, Widen widen)
{
    switch (work) {
    case KernelWork::Side:
        return blockSums<V, KernelWork::Side>(job, widen);
    case KernelWork::Change:
        return blockSums<V, KernelWork::Change>(job, widen);
    case KernelWork::Diff:
        break;
    }
    return blockSums<V, KernelWork::Diff>(job, widen);
}

ValueSums blockSumsPortable(const BlockJob& job, KernelWork work)
{
    return blockSumsFor<Split>(job, work, widenPortable);
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) ValueSums blockSumsAvx2(const BlockJob& job, KernelWork work)
{
    return blockSumsFor<Wide>(job, work, widenAvx2);
}
#endif

/// The AVX2 lanes where this build has them (kernelHasSimd() says whether the processor does).
ValueSums blockSumsSimd(const BlockJob& job, KernelWork work)
{
#if defined(__x86_64__)
    return blockSumsAvx2(job, work);
#else
    return blockSumsPortable(job, work);
#endif
}

/// Adds a later block's sums.
void mergeSums(ValueSums& total, const ValueSums& later)
{
    total.a.merge(later.a);
    total.b.merge(later.b);
    total.pair.merge(later.pair);
    total.sameBytes = total.sameBytes && later.sameBytes;
}

/// The block's bytes of one side: where they lie in memory, or loaded into this thread's `staging`.
Result<const std::uint8_t*> blockBytes(const ValueSpan& side, std::uint64_t first, std::uint64_t count,
                                       std::vector<std::uint8_t>& staging)
{
    const std::size_t es = dtypeSize(side.dtype);
    if (side.data)
        return side.data + first * es;
    staging.resize(static_cast<std::size_t>(count * es));
    TESSERA_TRY(side.load(first, count, staging.data()));
    return const_cast<const std::uint8_t*>(staging.data());
}

bool isInteger(DType dtype)
{
    return kernelReads(dtype) && !isFloatingPoint(dtype);
}

} // namespace

void SideSums::merge(const SideSums& later)
{
    if (later.finite) {
        if (finite == 0) {
            min = later.min;
            max = later.max;
            mean = later.mean;
            m2 = later.m2;
        } else {
            min = later.min < min ? later.min : min;
            max = later.max > max ? later.max : max;
            const double na = static_cast<double>(finite), nb = static_cast<double>(later.finite);
            const double delta = later.mean - mean;
            mean += delta * nb / (na + nb);
            m2 += later.m2 + delta * delta * na * nb / (na + nb);
        }
    }
    finite += later.finite;
    nan += later.nan;
    inf += later.inf;
    zeros += later.zeros;
    sumSquares += later.sumSquares;
}

void PairSums::merge(const PairSums& later)
{
    if (later.finitePairs) {
        minSigned = finitePairs == 0 || later.minSigned < minSigned ? later.minSigned : minSigned;
        maxSigned = finitePairs == 0 || later.maxSigned > maxSigned ? later.maxSigned : maxSigned;
    }
    gaps += later.gaps;
    finitePairs += later.finitePairs;
    dot += later.dot;
    normA += later.normA;
    normB += later.normB;
    sumSquaredChange += later.sumSquaredChange;
    sumAbsChange += later.sumAbsChange;
    maxAbsChange = std::max(maxAbsChange, later.maxAbsChange);
    differing += later.differing;
    outside += later.outside;
    nanOpposite += later.nanOpposite;
    maxRelDiff = std::max(maxRelDiff, later.maxRelDiff);
    if (later.worst >= 0 && (worst < 0 || later.maxAbsDiff > maxAbsDiff)) {
        worst = later.worst;
        maxAbsDiff = later.maxAbsDiff;
    }
}

bool kernelReads(DType dtype)
{
    switch (dtype) {
    case DType::Float64:
    case DType::Float32:
    case DType::BFloat16:
    case DType::Float16:
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16:
    case DType::UInt16:
    case DType::Int32:
    case DType::UInt32:
    case DType::Int64:
    case DType::UInt64:
        return true;
    default:
        return false;
    }
}

bool kernelHasSimd()
{
#if defined(__x86_64__)
    return hasAvx2();
#else
    return false;
#endif
}

void toDoubles(const std::uint8_t* src, DType dtype, double* dst, std::uint64_t count)
{
#if defined(__x86_64__)
    if (kernelHasSimd())
        return widenAvx2(src, dtype, dst, count);
#endif
    widenPortable(src, dtype, dst, count);
}

Result<ValueSums> valueSums(const ValueSpan& a, const ValueSpan* b, std::uint64_t count, const KernelOptions& options)
{
    const ValueSpan* second = b && options.work != KernelWork::Side ? b : nullptr;
    for (DType t : { a.dtype, second ? second->dtype : a.dtype })
        if (!kernelReads(t))
            return makeError("values of dtype " + std::string(torchName(t)) + " are not read as numbers");
    BlockJob job;
    job.dtypeA = a.dtype;
    job.missingA = a.missing;
    if (second) {
        job.dtypeB = second->dtype;
        job.missingB = second->missing;
        job.exact = isInteger(a.dtype) || isInteger(second->dtype);
    }
    job.skipEqual = options.skipEqualChunks;
    job.atol = options.atol;
    job.rtol = options.rtol;
    const bool simd = options.simd && kernelHasSimd();
    const std::size_t blocks = static_cast<std::size_t>((count + kBlock - 1) / kBlock);
    std::vector<ValueSums> sums(blocks);
    std::vector<Status> statuses(blocks, Status::success());
    std::atomic<bool> stop { false };
    parallelFor(blocks, resolveThreads(static_cast<int>(options.threads)), [&](std::size_t i) {
        if (stop || (options.canceled && options.canceled())) {
            stop = true;
            statuses[i] = canceledError();
            return;
        }
        thread_local std::vector<std::uint8_t> stagingA, stagingB;
        BlockJob mine = job;
        mine.first = i * kBlock;
        mine.count = std::min(kBlock, count - mine.first);
        auto pa = blockBytes(a, mine.first, mine.count, stagingA);
        auto pb = second ? blockBytes(*second, mine.first, mine.count, stagingB) : Result<const std::uint8_t*>(nullptr);
        if (!pa || !pb) {
            stop = true;
            statuses[i] = pa ? pb.error() : pa.error();
            return;
        }
        mine.a = *pa;
        mine.b = *pb;
        sums[i] = simd ? blockSumsSimd(mine, options.work) : blockSumsPortable(mine, options.work);
    });
    ValueSums total;
    total.sameBytes = second && a.dtype == second->dtype;
    for (std::size_t i = 0; i < blocks; ++i) {
        TESSERA_TRY(statuses[i]);
        mergeSums(total, sums[i]);
    }
    return total;
}

} // namespace tessera
