// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_types.h"

#include "formats/gguf_quant.h"
#include "formats/gguf_quant_k.h"
#include "formats/gguf_quant_legacy.h"

#include <algorithm>
#include <cctype>

namespace tessera {

const std::vector<GgmlTypeInfo>& ggmlTypes()
{
    // name, values and bytes per block, plain dtype, quantizer, dequantizer, fallback. The plain types first, then
    // the quantized ones in ggml's numbering.
    // Fallbacks: convert_hf_to_gguf writes a tensor whose rows are not whole Q8_0 blocks as F16, and llama-quant.cpp
    // (tensor_type_fallback) any of 32-value blocks too; a k-quant falls back to the legacy type of about its size.
    constexpr std::uint64_t kLegacy = kLegacyBlockValues;
    constexpr std::uint64_t kSuper = kSuperBlockValues;
    static const std::vector<GgmlTypeInfo> table = {
        { GgmlType::F32, "F32", 1, 4, DType::Float32, nullptr, nullptr, GgmlType::F32 },
        { GgmlType::F16, "F16", 1, 2, DType::Float16, nullptr, nullptr, GgmlType::F16 },
        { GgmlType::BF16, "BF16", 1, 2, DType::BFloat16, nullptr, nullptr, GgmlType::BF16 },
        { GgmlType::Q4_0, "Q4_0", kLegacy, sizeof(BlockQ4_0), DType::Unknown, quantizeQ4_0Blocks, dequantizeQ4_0Blocks,
          GgmlType::F16 },
        { GgmlType::Q4_1, "Q4_1", kLegacy, sizeof(BlockQ4_1), DType::Unknown, quantizeQ4_1Blocks, dequantizeQ4_1Blocks,
          GgmlType::F16 },
        { GgmlType::Q5_0, "Q5_0", kLegacy, sizeof(BlockQ5_0), DType::Unknown, quantizeQ5_0Blocks, dequantizeQ5_0Blocks,
          GgmlType::F16 },
        { GgmlType::Q5_1, "Q5_1", kLegacy, sizeof(BlockQ5_1), DType::Unknown, quantizeQ5_1Blocks, dequantizeQ5_1Blocks,
          GgmlType::F16 },
        { GgmlType::Q8_0, "Q8_0", sizeof(BlockQ8_0::q), sizeof(BlockQ8_0), DType::Unknown, quantizeQ8_0Blocks,
          dequantizeQ8_0Blocks, GgmlType::F16 },
        { GgmlType::Q2_K, "Q2_K", kSuper, sizeof(BlockQ2_K), DType::Unknown, quantizeQ2_KBlocks, dequantizeQ2_KBlocks,
          GgmlType::Q4_0 },
        { GgmlType::Q3_K, "Q3_K", kSuper, sizeof(BlockQ3_K), DType::Unknown, quantizeQ3_KBlocks, dequantizeQ3_KBlocks,
          GgmlType::Q4_0 },
        { GgmlType::Q4_K, "Q4_K", kSuper, sizeof(BlockQ4_K), DType::Unknown, quantizeQ4_KBlocks, dequantizeQ4_KBlocks,
          GgmlType::Q5_0 },
        { GgmlType::Q5_K, "Q5_K", kSuper, sizeof(BlockQ5_K), DType::Unknown, quantizeQ5_KBlocks, dequantizeQ5_KBlocks,
          GgmlType::Q5_1 },
        { GgmlType::Q6_K, "Q6_K", kSuper, sizeof(BlockQ6_K), DType::Unknown, quantizeQ6_KBlocks, dequantizeQ6_KBlocks,
          GgmlType::Q8_0 },
    };
    return table;
}

const GgmlTypeInfo* findGgmlType(std::uint32_t type)
{
    for (const auto& row : ggmlTypes())
        if (static_cast<std::uint32_t>(row.type) == type)
            return &row;
    return nullptr;
}

const GgmlTypeInfo& ggmlType(GgmlType type)
{
    if (const GgmlTypeInfo* row = findGgmlType(static_cast<std::uint32_t>(type)))
        return *row;
    return ggmlTypes().front(); // unreachable: every GgmlType has its row (checked by tst_gguf)
}

std::string ggmlTypeName(std::uint32_t type)
{
    const GgmlTypeInfo* row = findGgmlType(type);
    return row ? std::string(row->name) : "type " + std::to_string(type);
}

std::pair<std::uint64_t, std::uint64_t> ggmlBlock(std::uint32_t type)
{
    const GgmlTypeInfo* row = findGgmlType(type);
    return row ? std::pair { row->blockElements, row->blockBytes } : std::pair<std::uint64_t, std::uint64_t> { 0, 0 };
}

std::uint64_t ggmlBytes(std::uint32_t type, std::uint64_t elements)
{
    const GgmlTypeInfo* row = findGgmlType(type);
    return row ? row->bytesOf(elements) : 0;
}

std::string ggmlTypeList()
{
    const auto& rows = ggmlTypes();
    std::string list;
    for (std::size_t i = 0; i < rows.size(); ++i)
        list += (i == 0 ? "" : i + 1 == rows.size() ? " and " : ", ") + std::string(rows[i].name);
    return list;
}

GgmlType ggmlTypeForRows(GgmlType wanted, std::uint64_t rowElements)
{
    GgmlType type = wanted;
    // Each fallback has smaller blocks, down to a plain type's 1; the bound only guards a table that loops.
    for (std::size_t step = 0; step <= ggmlTypes().size(); ++step) {
        const GgmlTypeInfo& row = ggmlType(type);
        if (rowElements % row.blockElements == 0)
            return type;
        type = row.fallback;
    }
    return GgmlType::F32;
}

const std::vector<GgufOutTypeInfo>& ggufOutTypes()
{
    // name, other spellings, general.file_type (llama_ftype), the type of weight matrices, what it is for
    static const std::vector<GgufOutTypeInfo> table = {
        { GgufOutType::F32, "f32", { "fp32", "float32" }, 0, GgmlType::F32, "32-bit floats: lossless, the largest" },
        { GgufOutType::F16, "f16", { "fp16", "float16" }, 1, GgmlType::F16, "16-bit floats, as llama.cpp's converter writes" },
        { GgufOutType::BF16, "bf16", { "bfloat16" }, 32, GgmlType::BF16, "bfloat16: lossless for bf16 training" },
        { GgufOutType::Q8_0, "q8_0", { "q8" }, 7, GgmlType::Q8_0, "8.5 bits a weight: error hardly measurable" },
        { GgufOutType::Q6_K, "q6_k", {}, 18, GgmlType::Q6_K, "6.6 bits a weight: close to q8_0, 3/4 of its size" },
        { GgufOutType::Q5_K_M, "q5_k_m", {}, 17, GgmlType::Q5_K,
          "5.5 bits: 5-bit k-quant, q6_k for attn_v and ffn_down in half the layers" },
        { GgufOutType::Q5_K_S, "q5_k_s", {}, 16, GgmlType::Q5_K, "5.5 bits: 5-bit k-quant throughout" },
        { GgufOutType::Q5_1, "q5_1", {}, 9, GgmlType::Q5_1, "6 bits: legacy 5-bit blocks with an offset" },
        { GgufOutType::Q5_0, "q5_0", {}, 8, GgmlType::Q5_0, "5.5 bits: legacy 5-bit blocks" },
        { GgufOutType::Q4_K_M, "q4_k_m", {}, 15, GgmlType::Q4_K,
          "4.8 bits: Ollama's default; 4-bit k-quant, q6_k for attn_v and ffn_down in half the layers" },
        { GgufOutType::Q4_K_S, "q4_k_s", {}, 14, GgmlType::Q4_K, "4.6 bits: 4-bit k-quant, more bits in the first layers" },
        { GgufOutType::Q4_1, "q4_1", {}, 3, GgmlType::Q4_1, "5 bits: legacy 4-bit blocks with an offset" },
        { GgufOutType::Q4_0, "q4_0", {}, 2, GgmlType::Q4_0, "4.5 bits: legacy 4-bit blocks" },
        { GgufOutType::Q3_K_M, "q3_k_m", {}, 12, GgmlType::Q3_K, "3.9 bits: 3-bit k-quant; clearly less accurate" },
        { GgufOutType::Q2_K, "q2_k", {}, 10, GgmlType::Q2_K, "3.4 bits: the smallest; large error" },
    };
    return table;
}

const GgufOutTypeInfo& ggufOutType(GgufOutType type)
{
    for (const auto& row : ggufOutTypes())
        if (row.id == type)
            return row;
    return ggufOutTypes().front(); // unreachable: every GgufOutType has its row (checked by tst_gguf)
}

const char* ggufOutTypeName(GgufOutType type) { return ggufOutType(type).name; }

std::optional<GgufOutType> ggufOutTypeFromName(std::string_view name)
{
    std::string n(name);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const auto& row : ggufOutTypes()) {
        if (n == row.name)
            return row.id;
        for (const char* alias : row.aliases)
            if (n == alias)
                return row.id;
    }
    return std::nullopt;
}

std::string ggufOutTypeChoices(std::string_view separator, std::string_view last)
{
    const auto& rows = ggufOutTypes();
    std::string list;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (i > 0)
            list += i + 1 == rows.size() ? last : separator;
        list += rows[i].name;
    }
    return list;
}

} // namespace tessera
