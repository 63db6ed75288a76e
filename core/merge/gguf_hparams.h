// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// config.json's hyperparameters as a GGUF file carries them, and their check against the tensors they describe.
// llama.cpp builds the shape of every tensor it loads from these numbers (n_embd, n_head, n_ff, …), so a config
// that disagrees with its checkpoint gives a file llama.cpp cannot load, or a generated tensor (llama 3's
// rope_freqs) sized by a number no tensor backs.

#include "formats/gguf_names.h"
#include "model/checkpoint.h"
#include "result.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

namespace tessera {

struct GgufHparams {
    std::int64_t hidden = 0, layers = 0, heads = 0, kvHeads = 0, ffn = 0, context = 0, headDim = 0, vocab = 0;
    bool headDimGiven = false;           ///< head_dim is in config.json (else hidden_size / num_attention_heads)
    double eps = 1e-6, theta = 10000;
    std::int64_t experts = 0, expertsUsed = 0, expertFfn = 0, sharedFfn = 0;
    std::string expertsKey;              ///< "num_experts" or "num_local_experts", for messages
};

/// Reads the hyperparameters an architecture needs from config.json; a missing one is an error naming `file`.
Result<GgufHparams> readGgufHparams(const nlohmann::json& config, const GgufArchitecture& arch, const std::string& file);

/// Checks `hp` against the tensors of `info` (Hugging Face names) as llama.cpp will check them when it loads the
/// file: every layer from 0 to num_hidden_layers − 1 there and no other, each with the tensors the architecture
/// needs and none it has no place for, every tensor of the shape the numbers give (hidden_size against the
/// embedding's width, num_attention_heads × head_dim against q_proj's rows, intermediate_size against the MLP,
/// vocab_size against the embedding's rows, the experts…), and numbers llama.cpp cannot use (an odd head_dim, more
/// experts per token than experts). One error with every reason; it reads names and shapes only. With `tied` the
/// output head is the embedding and lm_head.weight is not looked at.
Status checkGgufHparams(const GgufHparams& hp, const GgufArchitecture& arch, const CheckpointInfo& info, bool tied,
                        const std::string& file);

} // namespace tessera
