// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Hugging Face ↔ llama.cpp names for the architectures Tessera writes as GGUF (gguf-py's tensor names).

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// A llama.cpp architecture and what its tensors need.
struct GgufArchitecture {
    std::string name;           ///< general.architecture: "llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe"
    bool permuteQK = false;     ///< llama's rotary layout: q/k rows interleaved per head (convert's LlamaModel.permute)
    bool moe = false;
};

/// The architecture for config.json's `architectures` entry (e.g. "MistralForCausalLM" → llama); nullopt when
/// Tessera cannot write it.
std::optional<GgufArchitecture> ggufArchitectureFor(const std::string& hfArchitecture);

/// The Hugging Face architectures ggufArchitectureFor() knows, for messages.
std::vector<std::string> ggufSupportedHfArchitectures();

/// Where a Hugging Face tensor goes in a GGUF file.
struct GgufNameMapping {
    std::string name;          ///< "blk.3.attn_q.weight", or the stacked "blk.3.ffn_gate_exps.weight" for an expert
    int expert = -1;           ///< ≥ 0: this expert's slice of the stacked tensor
    bool skip = false;         ///< not written (rotary inv_freq buffers)
};

/// The GGUF name of `hfName`; nullopt when llama.cpp has no place for it.
std::optional<GgufNameMapping> ggufTensorName(const std::string& hfName);

/// The Hugging Face name of a GGUF tensor (`expert` ≥ 0 picks one expert of a stacked ffn_*_exps tensor);
/// `mixtral` selects Mixtral's block_sparse_moe names for experts and the router. Empty when unknown.
std::string hfTensorName(const std::string& ggufName, int expert, bool mixtral);

} // namespace tessera
