// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The GGUF types Tessera writes and reads, stated once. Two tables, one row per type:
//
// - ggml's tensor types (GgmlType, ggml.h's numbering): the name ggml prints, the block geometry (values and bytes
//   per block: 1 and the element size for the plain types; 32 values in 18 to 34 bytes for the legacy Q4_0, Q4_1,
//   Q5_0, Q5_1 and Q8_0; super-blocks of 256 values in 84 to 210 bytes for llama.cpp's k-quants Q2_K … Q6_K), the
//   dtype of a plain type, the quantizer and dequantizer of a quantized one, and the type a tensor falls back to
//   when its rows are not whole blocks. The GGUF header's sizes (gguf_file), the writer and the parts' byte ranges
//   (merge/gguf_merge, merge/gguf_parts), the reader (layout_gguf) and the decoding of a quantized piece
//   (merge/encoded_piece) take every size and codec from here.
// - the output types a user picks (`--outtype`): the name as typed, general.file_type, and the ggml type its
//   weight matrices are written in. The command line's parsing and help, the workbench's choice and the GGUF plan
//   read this table.
//
// Two tables, because an output type names a file's mixture (llama.cpp's q4_k_m writes Q4_K and Q6_K tensors, and
// Q5_0 where a row is not whole super-blocks), while geometry and codec belong to each ggml type a file holds, and
// a reader meets ggml types, never output types. A fallback, too, belongs to the ggml type (llama-quant.cpp's
// tensor_type_fallback: Q2_K and Q3_K fall back to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, the types of
// 32-value blocks and anything whose fallback does not fit either to F16).
//
// A new type is: its GgmlType value and row (with its quantize/dequantize kernels: Q8_0's in gguf_quant.h, the other
// legacy types' in gguf_quant_legacy.h, the k-quants' in gguf_quant_k.h), and, when users may ask for it, its
// GgufOutType value and row; a type mixture would add the rule that picks each tensor's ggml type to its output row.

#include "model/dtype.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

/// ggml tensor types Tessera writes or reads (ggml.h's numbering).
enum class GgmlType : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    BF16 = 30,
};

/// Quantizes `blocks` whole blocks of float32 values at `src` into `dst`, on the calling thread (gguf_quant.h
/// splits a tensor over threads).
using GgmlQuantizeFn = void (*)(const float* src, std::uint64_t blocks, std::uint8_t* dst);
/// Expands `blocks` whole blocks at `src` back into float32 values at `dst`, as ggml's dequantize_row_*.
using GgmlDequantizeFn = void (*)(const std::uint8_t* src, std::uint64_t blocks, float* dst);

/// One row of the table of ggml types.
struct GgmlTypeInfo {
    GgmlType type;
    const char* name;             ///< "Q8_0", as ggml prints it
    std::uint64_t blockElements;  ///< values per block: 1 for the plain types
    std::uint64_t blockBytes;     ///< bytes per block
    DType plainDtype;             ///< the element dtype of a plain type; DType::Unknown for a quantized one
    GgmlQuantizeFn quantize;      ///< a quantized type's ggml quantize_row_*_ref; nullptr for a plain one
    GgmlDequantizeFn dequantize;  ///< a quantized type's dequantizer; nullptr for a plain one
    GgmlType fallback;            ///< written instead when rows are not whole blocks (a plain type: itself)

    bool quantized() const { return quantize != nullptr; }
    /// Bytes of `elements` values (a whole number of blocks: rows are).
    std::uint64_t bytesOf(std::uint64_t elements) const { return elements / blockElements * blockBytes; }
};

/// Every ggml type Tessera knows, in the order messages list them: the plain types (F32, F16, BF16), then the
/// quantized ones in ggml's numbering (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K … Q6_K).
const std::vector<GgmlTypeInfo>& ggmlTypes();
/// The row of `type`; nullptr for a type Tessera does not know (a file's type number is anything).
const GgmlTypeInfo* findGgmlType(std::uint32_t type);
/// The row of a type Tessera knows.
const GgmlTypeInfo& ggmlType(GgmlType type);

/// "F32", "F16", "Q8_0", "BF16"; "type N" for others.
std::string ggmlTypeName(std::uint32_t type);
/// Elements per block and bytes per block; {0, 0} when unknown.
std::pair<std::uint64_t, std::uint64_t> ggmlBlock(std::uint32_t type);
/// Bytes of `elements` elements of `type` (elements must be a multiple of the block size); 0 when unknown.
std::uint64_t ggmlBytes(std::uint32_t type, std::uint64_t elements);
/// "F32, F16, BF16, Q4_0, …, Q5_K and Q6_K": the types Tessera reads, for messages.
std::string ggmlTypeList();

/// The type a tensor whose rows hold `rowElements` values is written in when `wanted` is asked for: `wanted`
/// when its rows are whole blocks, else its fallback's, and so on (a plain type always fits).
GgmlType ggmlTypeForRows(GgmlType wanted, std::uint64_t rowElements);

/// llama.cpp's general.quantization_version (GGML_QNT_VERSION), written into every file.
inline constexpr std::uint32_t kGgmlQuantizationVersion = 2;

/// --outtype. The quantized ones are llama.cpp's llama_ftype mixtures of the same names (gguf_mixture.h).
enum class GgufOutType { F32, F16, BF16, Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q5_1, Q5_0, Q4_K_M, Q4_K_S, Q4_1, Q4_0, Q3_K_M, Q2_K };

/// One row of the table of output types.
struct GgufOutTypeInfo {
    GgufOutType id;
    const char* name;             ///< as the user types it and the file name ends: "q8_0"
    std::vector<const char*> aliases; ///< other spellings accepted ("fp32", "float32")
    std::uint32_t fileType;       ///< general.file_type (llama.cpp's llama_ftype)
    GgmlType tensorType;          ///< what weight matrices are written in (norms and 1-D tensors stay F32); for a
                                  ///< quantized type, the mixture's default (llama_ftype_get_default_type)
    const char* summary;          ///< one line for help and the workbench: what the type is for

    /// The row of tensorType: its geometry, quantizer and fallback.
    const GgmlTypeInfo& tensorTypeInfo() const { return ggmlType(tensorType); }
};

/// Every output type, in the order the help and the workbench list them.
const std::vector<GgufOutTypeInfo>& ggufOutTypes();
/// The row of `type`.
const GgufOutTypeInfo& ggufOutType(GgufOutType type);
/// What an export writes when no --outtype is given: f16, as llama.cpp's converter does for floating checkpoints.
inline constexpr GgufOutType kDefaultGgufOutType = GgufOutType::F16;

/// "f32", "f16", "bf16", "q8_0".
const char* ggufOutTypeName(GgufOutType type);
/// Parses --outtype: a row's name or one of its aliases, in any case.
std::optional<GgufOutType> ggufOutTypeFromName(std::string_view name);
/// The names users may type, for help and messages: "f32, f16, bf16 or q8_0" with the default separators,
/// "f32|f16|bf16|q8_0" with "|" and "|".
std::string ggufOutTypeChoices(std::string_view separator = ", ", std::string_view last = " or ");

} // namespace tessera
