// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// How far a tensor moved between two saved steps: the statistics `tessera drift` reports for one tensor at one step,
// computed straight from the stored bytes of both steps by the statistics kernel (value_kernel.h), blocks of a
// large tensor over several threads.

#include "compare/value_kernel.h"
#include "model/dtype.h"
#include "result.h"

#include <cstdint>

namespace tessera {

/// The sums behind one drift record. Floating values only; sums in float64.
struct ChangeSums {
    std::uint64_t nan = 0;          ///< NaN elements of the current step's tensor
    std::uint64_t inf = 0;          ///< ±Inf elements of the current step's tensor
    std::uint64_t previousNonFinite = 0; ///< NaN or ±Inf elements of the previous step's tensor
    double sumSquares = 0;          ///< Σ x² over the current step's finite elements
    double previousSumSquares = 0;  ///< Σ y² over the previous step's finite elements
    double sumSquaredChange = 0;    ///< Σ (x − y)² over elements finite on both sides
    double maxAbsChange = 0;        ///< max |x − y| over elements finite on both sides
    /// Adds the sums of a later block (counts and sums add, maxima take the larger).
    void merge(const ChangeSums& later);
};

/// True for the dtypes changeSums() reads: float64, float32, bfloat16, float16.
bool changeKernelReads(DType dtype);

/// The sums of `count` elements of `current` (dtype `currentType`) against `previous` (`previousType`; null when
/// there is no previous step: the previous-side sums stay 0): valueSums() with KernelWork::Change. Tensors above a
/// block's size are cut into fixed blocks handed to up to `threads` threads (0 = one per core); the blocks' sums
/// are merged in block order, so the result never depends on the thread count. An Error for a dtype
/// changeKernelReads() refuses.
Result<ChangeSums> changeSums(const std::uint8_t* current, DType currentType, const std::uint8_t* previous,
                              DType previousType, std::uint64_t count, unsigned threads = 0);

/// changeSums() of values as the kernel reads them: in memory, or read block by block where their files hold them
/// (TensorValues::span(): no copy of either step's tensor is held).
Result<ChangeSums> changeSums(const ValueSpan& current, const ValueSpan* previous, std::uint64_t count,
                              unsigned threads = 0);

} // namespace tessera
