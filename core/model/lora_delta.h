// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A LoRA update to fuse into one weight: W' = W + (B·A)·scale. The LoRA reader (mapping/) produces these; the merge
// plan and engine (merge/) apply them. Kept here, in the checkpoint vocabulary, so neither has to know the other.

#include <string>

namespace tessera {

struct LoraDelta {
    std::string weight;      ///< the base weight's name in the checkpoint description, [out, in]
    std::string a;           ///< lora_A: [r, in]   (embeddings: lora_embedding_A, [r, num_embeddings])
    std::string b;           ///< lora_B: [out, r]  (embeddings: lora_embedding_B, [embedding_dim, r])
    double scale = 1;        ///< lora_alpha / r, or lora_alpha / √r with rsLoRA
    bool transposed = false; ///< embeddings: the update is (B·A)ᵀ, as PEFT's Embedding layer computes it
};

} // namespace tessera
