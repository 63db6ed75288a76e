// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The GGUF container (version 3) as llama.cpp reads it: a header of typed metadata key/values and tensor infos,
// then the tensor data, each tensor aligned to `general.alignment` (32 by default). Everything is little-endian.

#include "formats/gguf_types.h"
#include "io/mapped_file.h"
#include "result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace tessera {

inline constexpr std::uint32_t kGgufVersion = 3;
inline constexpr std::uint64_t kGgufAlignment = 32;

/// GGUF metadata value types (gguf.h's numbering).
enum class GgufValueType : std::uint32_t {
    UInt8 = 0, Int8 = 1, UInt16 = 2, Int16 = 3, UInt32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
    String = 8, Array = 9, UInt64 = 10, Int64 = 11, Float64 = 12,
};

/// One metadata value. Scalars keep their GGUF type; arrays are homogeneous.
struct GgufValue {
    GgufValueType type = GgufValueType::UInt32;
    GgufValueType elementType = GgufValueType::UInt32; ///< for arrays
    std::variant<std::uint64_t, std::int64_t, double, bool, std::string, std::vector<std::uint64_t>,
                 std::vector<std::int64_t>, std::vector<double>, std::vector<std::string>, std::vector<bool>>
        data;

    static GgufValue u32(std::uint32_t v);
    static GgufValue u64(std::uint64_t v);
    static GgufValue i32(std::int32_t v);
    static GgufValue f32(float v);
    static GgufValue boolean(bool v);
    static GgufValue string(std::string v);
    static GgufValue strings(std::vector<std::string> v);
    static GgufValue f32s(std::vector<double> v);
    static GgufValue i32s(std::vector<std::int64_t> v);

    /// For display: the value, or "[N strings]" / the first few elements of an array.
    std::string summary(std::size_t maxChars = 80) const;
    /// The value as an integer, when it is one.
    std::optional<std::int64_t> asInt() const;
    std::optional<double> asFloat() const;
    const std::string* asString() const { return std::get_if<std::string>(&data); }
};

struct GgufKeyValue {
    std::string key;
    GgufValue value;
};

/// One tensor of a GGUF file. `dims` are ggml's ne[] (innermost first), i.e. the PyTorch shape reversed.
struct GgufTensorInfo {
    std::string name;
    std::vector<std::uint64_t> dims;
    std::uint32_t type = 0;
    std::uint64_t offset = 0; ///< from the start of the data section
    std::uint64_t bytes = 0;  ///< computed from dims and type
};

/// The header of a GGUF file to be written: its bytes, and where each tensor's data starts in the file.
struct GgufLayout {
    std::string header;                       ///< the bytes at [0, dataStart), padded to the alignment
    std::uint64_t dataStart = 0;
    std::vector<std::uint64_t> fileOffsets;   ///< absolute, per tensor in input order
    std::uint64_t fileSize = 0;               ///< header + data (each tensor padded to the alignment)
};

/// Lays out a GGUF v3 file: metadata in the given order, the tensors in the given order, each at an offset
/// aligned to kGgufAlignment. Tensor `offset`s and `bytes` are computed here (inputs' values are ignored).
/// Errors: a tensor type Tessera cannot size, a row not a multiple of the type's block, duplicate names.
Result<GgufLayout> layoutGgufFile(const std::vector<GgufKeyValue>& metadata, std::vector<GgufTensorInfo>& tensors);

/// A parsed GGUF header.
struct GgufHeader {
    std::uint32_t version = 0;
    std::vector<GgufKeyValue> metadata;
    std::vector<GgufTensorInfo> tensors;
    std::uint64_t alignment = kGgufAlignment;
    std::uint64_t dataStart = 0;             ///< absolute offset of the data section
    const GgufValue* find(const std::string& key) const;
};

/// Parses the header of a GGUF file (versions 2 and 3). Every count and length is checked against the bytes
/// present before anything is allocated, and every tensor's data against the file's size.
Result<GgufHeader> parseGgufHeader(const ByteView& file);

/// True when the first bytes are the GGUF magic.
bool looksLikeGguf(const ByteView& file);

} // namespace tessera
