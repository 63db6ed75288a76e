// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/dtype.h"

#include <array>

namespace tessera {

namespace {
struct DTypeRow {
    DType dtype;
    std::size_t size;
    std::string_view torch;
    std::string_view safetensors;
    std::string_view storageClass;
    bool floating;
};

// One row per dtype; the storage class is the legacy typed storage torch.save names (empty for "new" dtypes,
// which are written as UntypedStorage plus an explicit dtype).
constexpr std::array<DTypeRow, 24> kRows { {
    { DType::Bool, 1, "bool", "BOOL", "BoolStorage", false },
    { DType::UInt8, 1, "uint8", "U8", "ByteStorage", false },
    { DType::Int8, 1, "int8", "I8", "CharStorage", false },
    { DType::Int16, 2, "int16", "I16", "ShortStorage", false },
    { DType::UInt16, 2, "uint16", "U16", "", false },
    { DType::Int32, 4, "int32", "I32", "IntStorage", false },
    { DType::UInt32, 4, "uint32", "U32", "", false },
    { DType::Int64, 8, "int64", "I64", "LongStorage", false },
    { DType::UInt64, 8, "uint64", "U64", "", false },
    { DType::Float16, 2, "float16", "F16", "HalfStorage", true },
    { DType::BFloat16, 2, "bfloat16", "BF16", "BFloat16Storage", true },
    { DType::Float32, 4, "float32", "F32", "FloatStorage", true },
    { DType::Float64, 8, "float64", "F64", "DoubleStorage", true },
    { DType::Complex32, 4, "complex32", "", "", true },
    { DType::Complex64, 8, "complex64", "C64", "ComplexFloatStorage", true },
    { DType::Complex128, 16, "complex128", "", "ComplexDoubleStorage", true },
    { DType::Float8_e5m2, 1, "float8_e5m2", "F8_E5M2", "", true },
    { DType::Float8_e4m3fn, 1, "float8_e4m3fn", "F8_E4M3", "", true },
    { DType::Float8_e5m2fnuz, 1, "float8_e5m2fnuz", "F8_E5M2FNUZ", "", true },
    { DType::Float8_e4m3fnuz, 1, "float8_e4m3fnuz", "F8_E4M3FNUZ", "", true },
    { DType::Float8_e8m0fnu, 1, "float8_e8m0fnu", "F8_E8M0", "", true },
    { DType::QInt8, 1, "qint8", "", "QInt8Storage", false },
    { DType::QUInt8, 1, "quint8", "", "QUInt8Storage", false },
    { DType::QInt32, 4, "qint32", "", "QInt32Storage", false },
} };

const DTypeRow* rowFor(DType dtype)
{
    for (const auto& row : kRows)
        if (row.dtype == dtype)
            return &row;
    return nullptr;
}
} // namespace

std::size_t dtypeSize(DType dtype)
{
    const auto* row = rowFor(dtype);
    return row ? row->size : 0;
}

std::string_view torchName(DType dtype)
{
    const auto* row = rowFor(dtype);
    return row ? row->torch : std::string_view("unknown");
}

std::string_view safetensorsCode(DType dtype)
{
    const auto* row = rowFor(dtype);
    return row ? row->safetensors : std::string_view();
}

bool isFloatingPoint(DType dtype)
{
    const auto* row = rowFor(dtype);
    return row && row->floating;
}

std::optional<DType> dtypeFromTorchName(std::string_view name)
{
    if (name.substr(0, 6) == "torch.")
        name.remove_prefix(6);
    for (const auto& row : kRows)
        if (row.torch == name)
            return row.dtype;
    // torch's aliases, as `torch.float` etc. pickle under their canonical names but users type these.
    if (name == "float")
        return DType::Float32;
    if (name == "half")
        return DType::Float16;
    if (name == "double")
        return DType::Float64;
    if (name == "long")
        return DType::Int64;
    if (name == "int")
        return DType::Int32;
    if (name == "short")
        return DType::Int16;
    if (name == "cfloat")
        return DType::Complex64;
    if (name == "cdouble")
        return DType::Complex128;
    if (name == "chalf")
        return DType::Complex32;
    return std::nullopt;
}

std::optional<DType> dtypeFromStorageClass(std::string_view className)
{
    for (const auto& row : kRows)
        if (!row.storageClass.empty() && row.storageClass == className)
            return row.dtype;
    if (className == "UntypedStorage")
        return DType::UInt8;
    return std::nullopt;
}

std::optional<DType> dtypeFromSafetensorsCode(std::string_view code)
{
    for (const auto& row : kRows)
        if (!row.safetensors.empty() && row.safetensors == code)
            return row.dtype;
    return std::nullopt;
}

std::optional<DType> dtypeFromUserName(std::string_view name)
{
    if (name == "bf16" || name == "bfloat16")
        return DType::BFloat16;
    if (name == "fp16" || name == "float16" || name == "half")
        return DType::Float16;
    if (name == "fp32" || name == "float32" || name == "float")
        return DType::Float32;
    return std::nullopt;
}

} // namespace tessera
