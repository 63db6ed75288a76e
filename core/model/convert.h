// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/dtype.h"
#include "result.h"

#include <cstdint>
#include <optional>

namespace tessera {

/// True when convertElements() can convert `from` into `to`.
bool canConvert(DType from, DType to);

/// The dtype a tensor of `source` has after a `--dtype requested` conversion: only floating tensors of two bytes or
/// more convert (integer, bool and float8 tensors keep theirs); nullopt keeps every dtype.
DType convertedDtype(DType source, std::optional<DType> requested);

/// The dtype two floating tensors of different widths are compared at: the narrower one, the wider side rounded to
/// it as torch rounds (an fp32 run against a bf16 reference, as verl's test compares by casting). Nullopt when they
/// are not both floating of two bytes or more, have the same width (fp16 vs bf16 must match as they are) or cannot
/// be converted.
std::optional<DType> narrowerComparisonDtype(DType a, DType b);

/// Converts `count` contiguous elements of `srcType` at `src` into `dstType` at `dst` (which must not overlap
/// `src`). Float16, BFloat16, Float32 and Float64 convert in any direction bit-exactly as torch's `.to()` does:
/// round to nearest, ties to even; narrowing from Float64 rounds to Float32 first, then to the 16-bit type, as
/// c10 does; Float16 ↔ BFloat16 goes through Float32. Infinities, signed zeros and subnormals are kept; a NaN stays a
/// quiet NaN of the same sign (torch itself writes different NaN bit patterns in its vectorised and scalar
/// paths, so only NaN-ness is guaranteed). The same type is a plain copy, for every dtype; integer and bool
/// types convert only to themselves. Runs on the calling thread (no ATen thread pool), so callers can
/// parallelise over tensors.
Status convertElements(const void* src, DType srcType, void* dst, DType dstType, std::uint64_t count);

/// `accumulator[i] += src[i]` converted to Float32, for summing the terms of a Partial(sum) placement.
/// `srcType` must be Float16, BFloat16, Float32 or Float64 (Float64 terms are rounded to Float32 first).
/// Write the finished sum with `convertElements(accumulator, DType::Float32, dst, target, count)`.
/// Summing in Float32 is at least as precise as torch's own all-reduce in the tensor's dtype, but not
/// bit-identical to it (NCCL's reduction order is not recorded).
Status accumulatePartial(float* accumulator, const void* src, DType srcType, std::uint64_t count);

} // namespace tessera
