// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Which ggml type each tensor of a quantized GGUF file gets: llama.cpp's quantization mixtures (src/llama-quant.cpp
// of the llama.cpp release node-llama-cpp 3.22.1 bundles), as `llama-quantize IN OUT TYPE` without an importance
// matrix applies them to a file whose tensors are plain floats. A "_m" type gives attn_v and ffn_down more bits in
// some layers, every quantized type gives the output head (or a tied embedding) Q6_K, and a row that is not whole
// blocks of the chosen type falls back down the table's chain (Q4_K → Q5_0, Q6_K → Q8_0, … → F16).
//
// The rules read tensor names, shapes and a few hyperparameters, never values, so a plan can state the whole file
// (types, sizes, offsets) before anything is read.

#include "formats/gguf_types.h"
#include "result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// The hyperparameters the rules look at, as the file's metadata gives them.
struct GgufMixtureModel {
    std::string architecture;       ///< general.architecture: "llama", "qwen2", …
    std::uint64_t layers = 0;       ///< {arch}.block_count
    std::uint64_t heads = 0;        ///< {arch}.attention.head_count
    std::uint64_t kvHeads = 0;      ///< {arch}.attention.head_count_kv
    std::uint64_t experts = 0;      ///< {arch}.expert_count; 0 for a dense model
};

/// One tensor as the plain export holds it.
struct GgufMixtureTensor {
    std::string name;               ///< llama.cpp's name: "blk.3.attn_v.weight"
    std::vector<std::uint64_t> dims; ///< ggml order: dims[0] is the row length
    GgmlType stored = GgmlType::F32; ///< its type in the plain export (what the quantizer would read)
};

/// What a tensor is written as in the quantized file.
struct GgufMixtureChoice {
    GgmlType type = GgmlType::F32;
    bool fellBack = false;          ///< the mixture's type did not fit its rows and a fallback was taken
};

/// Each tensor's type when `outType` (a quantized output type) is made from a plain export holding `tensors`, in
/// `tensors`' order. Tensors the quantizer leaves alone (1-D ones, norms, the MoE router, names not ending in
/// "weight") keep their stored type. An error where llama.cpp would stop (an expert tensor outside the layers).
Result<std::vector<GgufMixtureChoice>> ggufMixtureTypes(const GgufOutTypeInfo& outType, const GgufMixtureModel& model,
                                                        const std::vector<GgufMixtureTensor>& tensors);

} // namespace tessera
