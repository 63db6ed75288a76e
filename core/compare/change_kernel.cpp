// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/change_kernel.h"

#include "model/convert.h"
#include "parallel.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera {

namespace {

/// Elements per block: the unit handed to a thread, and the size of its float64 conversion buffers (1 MiB each).
constexpr std::uint64_t kBlockElements = 1u << 17;

Status blockSums(const std::uint8_t* current, DType currentType, const std::uint8_t* previous, DType previousType,
                 std::uint64_t count, ChangeSums& out)
{
    std::vector<double> x(count), y(previous ? count : 0);
    TESSERA_TRY(convertElements(current, currentType, x.data(), DType::Float64, count));
    if (previous)
        TESSERA_TRY(convertElements(previous, previousType, y.data(), DType::Float64, count));
    for (std::uint64_t i = 0; i < count; ++i) {
        const double xi = x[i];
        const bool xFinite = std::isfinite(xi);
        out.nan += std::isnan(xi) ? 1 : 0;
        out.inf += std::isinf(xi) ? 1 : 0;
        if (xFinite)
            out.sumSquares += xi * xi;
        if (!previous)
            continue;
        const double yi = y[i];
        if (!std::isfinite(yi)) {
            ++out.previousNonFinite;
            continue;
        }
        out.previousSumSquares += yi * yi;
        if (xFinite) {
            const double d = xi - yi;
            out.sumSquaredChange += d * d;
            out.maxAbsChange = std::max(out.maxAbsChange, std::fabs(d));
        }
    }
    return Status::success();
}

} // namespace

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

Result<ChangeSums> changeSums(const std::uint8_t* current, DType currentType, const std::uint8_t* previous,
                              DType previousType, std::uint64_t count, unsigned threads)
{
    for (DType t : { currentType, previous ? previousType : currentType })
        if (!changeKernelReads(t))
            return makeError("values of dtype " + std::string(torchName(t))
                             + " are not compared (float64, float32, bfloat16 and float16 are)");
    const std::size_t blocks = static_cast<std::size_t>((count + kBlockElements - 1) / kBlockElements);
    std::vector<ChangeSums> sums(blocks);
    std::vector<Status> statuses(blocks, Status::success());
    const std::size_t esX = dtypeSize(currentType), esY = previous ? dtypeSize(previousType) : 0;
    parallelFor(blocks, resolveThreads(static_cast<int>(threads)), [&](std::size_t b) {
        const std::uint64_t first = b * kBlockElements, n = std::min(kBlockElements, count - first);
        statuses[b] = blockSums(current + first * esX, currentType, previous ? previous + first * esY : nullptr,
                                previousType, n, sums[b]);
    });
    ChangeSums total;
    for (std::size_t b = 0; b < blocks; ++b) {
        TESSERA_TRY(statuses[b]);
        total.merge(sums[b]);
    }
    return total;
}

} // namespace tessera
