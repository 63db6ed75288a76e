// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// LoRA checkpoints: PEFT-wrapped names (base_model.model.….base_layer.weight, ….lora_A.<adapter>.weight, …), and
// verl's save_lora_only files that hold the adapter alone. Turns one into the two things users want: the base
// model with every adapted weight fused (W + B·A·scale, as LoraDeltas the merge applies while it streams), and the
// adapter as PEFT saves it (names without the adapter name, adapter_config.json).

#include "model/checkpoint.h"
#include "model/lora_delta.h"
#include "result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// What the user says about the adapter; each overrides what the checkpoint's files say.
struct LoraSettings {
    std::optional<double> alpha;       ///< --lora_alpha
    std::optional<bool> useRslora;     ///< --use_rslora: scale α/√r instead of α/r
};

/// The adapter's hyper-parameters and where each came from (for messages and the summary).
struct LoraConfig {
    std::int64_t r = 0;                      ///< the rank most modules have (adapter_config.json's "r")
    double alpha = 0;
    bool useRslora = false;
    std::vector<std::string> targetModules;  ///< last name component of every adapted module, sorted
    std::string taskType;                    ///< "CAUSAL_LM" unless a file says otherwise
    std::string adapterName;                 ///< PEFT's adapter name in the state dict ("default")
    std::string rSource;                     ///< "lora_train_meta.json", "the tensor shapes", …
    std::string alphaSource;
    std::string configText;                  ///< an adapter_config.json found in the checkpoint, kept as its base
};

/// One adapted module.
struct LoraModule {
    std::string module;         ///< Hugging Face module name: "model.layers.0.self_attn.q_proj"
    std::string weight;         ///< the weight it updates: "model.layers.0.self_attn.q_proj.weight"
    std::string sourceA;        ///< the checkpoint's names of its factors
    std::string sourceB;
    std::string adapterA;       ///< their names in adapter_model.safetensors
    std::string adapterB;
    std::int64_t rank = 0;
    double scale = 0;
    bool embedding = false;     ///< lora_embedding_A/B: the update is (B·A)ᵀ
};

/// A LoRA checkpoint, read.
struct LoraCheckpoint {
    LoraConfig config;
    std::vector<LoraModule> modules;
    bool adapterOnly = false;            ///< save_lora_only: the checkpoint holds no base weights
    bool hasBase = false;                ///< `fused` is complete (the checkpoint's base weights or --base_model)
    /// The base weights under Hugging Face names plus the factors (under their adapter names), with the
    /// updates in `fused.loraDeltas`: merged, it is the fused model. Empty when there is no base.
    CheckpointInfo fused;
    /// The factors (and modules_to_save copies) under PEFT's on-disk names: adapter_model.safetensors.
    CheckpointInfo adapter;
    std::string summary;                 ///< "LoRA adapter: 8 modules (q_proj, v_proj), r = 8, alpha = 16 (from …)"
    std::vector<std::string> notes;      ///< further facts for the user (adapter-only, a mismatching r, …)
    /// The checkpoint's own name of every base weight → its Hugging Face name ("….q_proj.base_layer.weight" →
    /// "….q_proj.weight"); frozen originals of trained copies map to "" (not written).
    std::map<std::string, std::string> baseNames;

    /// adapter_config.json as PEFT writes it (the checkpoint's own one, updated, when there was one).
    std::string adapterConfigJson() const;
};

/// True when `info` holds PEFT/LoRA tensors.
bool hasLoraTensors(const CheckpointInfo& info);

/// The Hugging Face names of the base model's weights `info` (a LoRA checkpoint) holds: PEFT's wrapping removed,
/// a trained copy (modules_to_save) in place of its frozen original. Empty for an adapter-only checkpoint.
std::vector<std::string> loraBaseWeightNames(const CheckpointInfo& info);

/// What `tessera inspect` and the workbench's summary say of a LoRA checkpoint, one line per fact (the modules,
/// r and alpha with their sources, what a merge writes, or why it cannot); empty for other checkpoints.
std::vector<std::string> loraSummaryLines(const CheckpointInfo& info);

/// Reads the LoRA checkpoint `info`. `base` is a Hugging Face model to take the base weights from (required for
/// fusing when `info` holds only the adapter; when `info` has its own base weights it is not used). The factors'
/// rank comes from their shapes; α from `settings`, lora_train_meta.json or an adapter_config.json beside the
/// checkpoint, never guessed: an unknown α is an error that says to pass --lora_alpha.
Result<LoraCheckpoint> readLoraCheckpoint(const CheckpointInfo& info, const LoraSettings& settings,
                                          const CheckpointInfo* base = nullptr);

} // namespace tessera
