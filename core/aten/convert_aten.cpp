// SPDX-License-Identifier: GPL-3.0-or-later
#include "convert_aten.h"

#include <ATen/ATen.h>

#include <cstring>
#include <optional>

namespace tessera {

namespace {
std::optional<at::ScalarType> scalarType(DType t)
{
    switch (t) {
    case DType::Bool: return at::kBool;
    case DType::UInt8: return at::kByte;
    case DType::Int8: return at::kChar;
    case DType::Int16: return at::kShort;
    case DType::Int32: return at::kInt;
    case DType::Int64: return at::kLong;
    case DType::Float16: return at::kHalf;
    case DType::BFloat16: return at::kBFloat16;
    case DType::Float32: return at::kFloat;
    case DType::Float64: return at::kDouble;
    default: return std::nullopt;
    }
}
} // namespace

Status convertElementsWithATen(const void* src, DType srcType, void* dst, DType dstType, std::uint64_t count)
{
    const auto from = scalarType(srcType);
    const auto to = scalarType(dstType);
    if (!from || !to)
        return makeError("ATen conversion from " + std::string(torchName(srcType)) + " to "
                         + std::string(torchName(dstType)) + " is not supported here");
    if (count == 0)
        return Status::success();
    if (!src || !dst)
        return makeError("ATen conversion: null buffer");
    try {
        const at::Tensor in = at::from_blob(const_cast<void*>(src), { static_cast<std::int64_t>(count) },
                                            at::TensorOptions().dtype(*from));
        const at::Tensor converted = in.to(*to).contiguous();
        std::memcpy(dst, converted.data_ptr(), count * dtypeSize(dstType));
    } catch (const c10::Error& e) {
        return makeError("ATen conversion failed: " + std::string(e.what_without_backtrace()));
    } catch (const std::exception& e) {
        return makeError(std::string("ATen conversion failed: ") + e.what());
    }
    return Status::success();
}

} // namespace tessera
