// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/pickle_writer.h"

#include <algorithm>

namespace tessera {

const char* torchStorageClass(DType dtype)
{
    switch (dtype) {
    case DType::Bool: return "BoolStorage";
    case DType::UInt8: return "ByteStorage";
    case DType::Int8: return "CharStorage";
    case DType::Int16: return "ShortStorage";
    case DType::Int32: return "IntStorage";
    case DType::Int64: return "LongStorage";
    case DType::Float16: return "HalfStorage";
    case DType::BFloat16: return "BFloat16Storage";
    case DType::Float32: return "FloatStorage";
    case DType::Float64: return "DoubleStorage";
    default: return nullptr;
    }
}

} // namespace tessera
