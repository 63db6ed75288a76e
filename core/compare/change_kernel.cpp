// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/change_kernel.h"

#include "compare/value_kernel.h"

#include <algorithm>

namespace tessera {

void ChangeSums::merge(const ChangeSums& later)
{
    nan += later.nan;
    inf += later.inf;
    previousNonFinite += later.previousNonFinite;
    sumSquares += later.sumSquares;
    previousSumSquares += later.previousSumSquares;
    sumSquaredChange += later.sumSquaredChange;
    maxAbsChange = std::max(maxAbsChange, later.maxAbsChange);
}

bool changeKernelReads(DType dtype)
{
    return dtype == DType::Float64 || dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float16;
}

Result<ChangeSums> changeSums(const ValueSpan& current, const ValueSpan* previous, std::uint64_t count,
                              unsigned threads)
{
    for (DType t : { current.dtype, previous ? previous->dtype : current.dtype })
        if (!changeKernelReads(t))
            return makeError("values of dtype " + std::string(torchName(t))
                             + " are not compared (float64, float32, bfloat16 and float16 are)");
    KernelOptions options;
    options.work = KernelWork::Change;
    options.threads = threads;
    auto sums = valueSums(current, previous, count, options);
    TESSERA_TRY(sums);
    ChangeSums out;
    out.nan = sums->a.nan;
    out.inf = sums->a.inf;
    out.sumSquares = sums->a.sumSquares;
    if (previous) {
        out.previousNonFinite = sums->b.nan + sums->b.inf;
        out.previousSumSquares = sums->b.sumSquares;
        out.sumSquaredChange = sums->pair.sumSquaredChange;
        out.maxAbsChange = sums->pair.maxAbsChange;
    }
    return out;
}

Result<ChangeSums> changeSums(const std::uint8_t* current, DType currentType, const std::uint8_t* previous,
                              DType previousType, std::uint64_t count, unsigned threads)
{
    ValueSpan now, before;
    now.dtype = currentType;
    now.data = current;
    before.dtype = previousType;
    before.data = previous;
    return changeSums(now, previous ? &before : nullptr, count, threads);
}

} // namespace tessera
