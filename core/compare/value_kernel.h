// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The one statistics kernel behind `tessera diff`, the Statistics window and `tessera drift`: the counts, sums and
// maxima of a tensor's values, or of two tensors element by element, computed from their stored bytes. Values are
// widened to float64 a small chunk at a time (exactly: every floating dtype, and integers up to 2^53), classified
// by their bits, and summed in four float64 lanes — with AVX2 where the processor has it, else portably with the
// same lanes in the same order, so both give the same bits (value_lanes.h). A tensor is cut into fixed blocks,
// handed to several threads and merged in block order: the result never depends on the thread count.

#include "model/dtype.h"
#include "result.h"

#include <cstdint>
#include <functional>

namespace tessera {

/// One side's values: in memory at `data`, or, when `data` is null, copied block by block by `load` (elements
/// [first, first + count) into `dst`: a tensor read from its files as it lies there). `missing` (null for a complete
/// side): one byte per element, 1 where the side holds no value (a gap, left out of every statistic).
struct ValueSpan {
    DType dtype = DType::Unknown;
    const std::uint8_t* data = nullptr;
    std::function<Status(std::uint64_t first, std::uint64_t count, std::uint8_t* dst)> load;
    const std::uint8_t* missing = nullptr;
};

/// What one side holds. Floating values: everything but the NaN and Inf counts over its finite elements only.
struct SideSums {
    std::uint64_t finite = 0;
    std::uint64_t nan = 0;
    std::uint64_t inf = 0;            ///< +inf and −inf
    std::uint64_t zeros = 0;          ///< +0 and −0
    double min = 0;                   ///< 0 when no element is finite
    double max = 0;
    double sumSquares = 0;            ///< Σ x²
    double mean = 0;
    double m2 = 0;                    ///< Σ (x − mean)², merged chunk by chunk (Chan et al.)
    /// Adds the sums of a later chunk (the order of merges is part of the result).
    void merge(const SideSums& later);
};

/// How two sides compare, over the elements both hold.
struct PairSums {
    std::uint64_t gaps = 0;           ///< elements a side lacks: left out of everything below
    std::uint64_t finitePairs = 0;    ///< elements finite on both sides: the sums and signed extremes are over these
    double dot = 0;                   ///< Σ x·y
    double normA = 0;                 ///< Σ x²
    double normB = 0;                 ///< Σ y²
    double sumSquaredChange = 0;      ///< Σ (x − y)²
    double sumAbsChange = 0;          ///< Σ |x − y|
    double maxAbsChange = 0;          ///< max |x − y|
    double minSigned = 0;             ///< min and max of x − y (0 with no finite pair)
    double maxSigned = 0;
    std::uint64_t differing = 0;      ///< x ≠ y (NaN opposite NaN is equal; integers: their bytes differ)
    std::uint64_t outside = 0;        ///< differing and failing |x − y| ≤ atol + rtol·|y| (integers: differing)
    std::uint64_t nanOpposite = 0;    ///< one side NaN, the other not
    double maxAbsDiff = 0;            ///< max |x − y| over differing elements, +inf where a NaN or an infinity is
                                      ///< one of the two
    double maxRelDiff = 0;            ///< max |x − y| / |y| over differing elements (+inf when y is 0 or either
                                      ///< is not finite)
    std::int64_t worst = -1;          ///< the first differing element with |x − y| = maxAbsDiff; -1 when none
    /// Adds the sums of a later chunk.
    void merge(const PairSums& later);
};

/// The statistics of a tensor, or of a pair.
struct ValueSums {
    SideSums a;
    SideSums b;                       ///< with a second side
    PairSums pair;                    ///< with a second side
    bool sameBytes = true;            ///< with a second side: both have the same dtype and every byte is equal
};

/// How much to compute.
enum class KernelWork {
    Side,   ///< A's statistics only (a second side is ignored)
    Change, ///< counts, Σ x² of each side, and the pair's Σ (x − y)² and max |x − y|: what `drift` needs (no
            ///< zeros, extremes, mean or m2 of the sides)
    Diff,   ///< everything
};

struct KernelOptions {
    KernelWork work = KernelWork::Diff;
    double atol = 0;                  ///< the tolerance `outside` is counted against
    double rtol = 0;
    unsigned threads = 0;             ///< threads for the blocks of one tensor; 0 = one per core
    std::function<bool()> canceled;   ///< polled between blocks
    bool simd = true;                 ///< false: the portable lanes even where AVX2 runs (to test that both agree)
    bool skipEqualChunks = true;      ///< false: chunks with equal bytes are summed as a pair all the same (tests)
};

/// True for the dtypes the kernel reads: float64, float32, bfloat16, float16, the integers and bool.
bool kernelReads(DType dtype);

/// True when this processor runs the kernel's AVX2 lanes (else the portable ones).
bool kernelHasSimd();

/// The statistics of `count` elements of `a`, and with `b` (unless the work is Side) of `b` and of the pair. A
/// chunk whose bytes are equal on both sides is summed once: B's sums are A's, the pair's follow. Integer and bool
/// values compare by their bytes, without tolerance. An Error for a dtype kernelReads() refuses, from a side's
/// `load`, or canceledError().
Result<ValueSums> valueSums(const ValueSpan& a, const ValueSpan* b, std::uint64_t count, const KernelOptions& options);

/// `count` elements of `dtype` (kernelReads()) at `src` as float64, as the kernel widens them: exactly for floats
/// and for integers up to 2^53.
void toDoubles(const std::uint8_t* src, DType dtype, double* dst, std::uint64_t count);

} // namespace tessera
