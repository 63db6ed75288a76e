// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The names PEFT gives a LoRA checkpoint's tensors (base_model.model.<module>.lora_A.<adapter>.weight, base_layer,
// modules_to_save, …) read back into what each tensor is: a factor, a frozen base weight, a trained copy, or
// something the fuse does not support.

#include <string>

namespace tessera {

/// The prefix PEFT puts before every module name.
inline constexpr const char* kPeftPrefix = "base_model.model.";

/// What a PEFT state-dict key is.
struct PeftName {
    enum class Kind {
        Plain,        ///< a weight PEFT does not wrap (embeddings, norms, …)
        Base,         ///< module.base_layer.<param>: the frozen base weight of an adapted module
        LoraA,
        LoraB,
        EmbeddingA,   ///< lora_embedding_A: a ParameterDict entry, no ".weight"
        EmbeddingB,
        SavedCopy,    ///< module.modules_to_save.<adapter>.<param>: a fully trained copy
        OriginalCopy, ///< module.original_module.<param>: the frozen original of a SavedCopy
        Unsupported,  ///< DoRA magnitudes, LoRA biases, …
    };
    Kind kind = Kind::Plain;
    std::string module;  ///< without the base_model.model. prefix
    std::string param;   ///< "weight", "bias"
    std::string adapter; ///< PEFT's adapter name; empty in on-disk adapter files
    std::string plainName() const { return module.empty() ? param : module + "." + param; }
};

/// What the state-dict key `key` is (with or without the base_model.model. prefix).
PeftName parsePeftName(const std::string& key);

/// True for the kinds that are LoRA factors (A or B, of a linear or an embedding).
bool isLoraFactor(PeftName::Kind k);

} // namespace tessera
