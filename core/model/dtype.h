// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

/// Element types found in checkpoints. Names follow torch; safetensors codes via safetensorsCode().
enum class DType {
    Bool,
    UInt8,
    Int8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float16,
    BFloat16,
    Float32,
    Float64,
    Complex32,
    Complex64,
    Complex128,
    Float8_e5m2,
    Float8_e4m3fn,
    Float8_e5m2fnuz,
    Float8_e4m3fnuz,
    Float8_e8m0fnu,
    QInt8,
    QUInt8,
    QInt32,
    Unknown,
};

/// Bytes per element (0 for Unknown).
std::size_t dtypeSize(DType dtype);
/// torch's name without the `torch.` prefix, e.g. "bfloat16".
std::string_view torchName(DType dtype);
/// safetensors header code, e.g. "BF16"; empty when safetensors cannot store it (complex128, quantized).
std::string_view safetensorsCode(DType dtype);
bool isFloatingPoint(DType dtype);

std::optional<DType> dtypeFromTorchName(std::string_view name);           ///< "bfloat16", "float", "half"…
std::optional<DType> dtypeFromStorageClass(std::string_view className);   ///< "BFloat16Storage"…
std::optional<DType> dtypeFromSafetensorsCode(std::string_view code);     ///< "BF16"…
/// User spelling for --dtype: bf16, bfloat16, fp16, float16, half, fp32, float32, float.
std::optional<DType> dtypeFromUserName(std::string_view name);

} // namespace tessera
