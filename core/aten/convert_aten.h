// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/dtype.h"
#include "result.h"

#include <cstdint>

namespace tessera {

/// The conversion convertElements() implements, done by ATen itself (`from_blob(src).to(dstType)` copied into
/// `dst`), with ATen's own NaN bit patterns. The tests use it as the oracle for bit-exactness with torch.
Status convertElementsWithATen(const void* src, DType srcType, void* dst, DType dstType, std::uint64_t count);

} // namespace tessera
