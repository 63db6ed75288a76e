// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What a merge of a LoRA checkpoint writes: the fused model into the target, the PEFT adapter into a sub-folder
// (lora_adapter/, as verl does), or both, published together.

#include "mapping/lora.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

enum class LoraOutput { Fused, Adapter, Both };

/// "fused", "adapter" or "both".
Result<LoraOutput> loraOutputFromName(const std::string& name);
/// The name --lora gives `output`.
const char* loraOutputName(LoraOutput output);

/// The adapter's file names, as PEFT saves them.
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";
inline constexpr const char* kAdapterConfigFile = "adapter_config.json";

/// The plans of a LoRA merge.
struct LoraMergePlans {
    std::optional<MergePlan> fused;      ///< into the target
    std::optional<MergePlan> adapter;    ///< into `adapterFolder` of the target
    std::string adapterFolder = "lora_adapter";
    std::vector<std::string> notes;      ///< what the user should know (no base: only the adapter is written, …)

    /// The outputs to hand to mergeCheckpoints(), fused model first.
    std::vector<MergeOutput> outputs(const LoraCheckpoint& lora) const;
    /// The plan the written model is judged by (the fused one when there is one).
    const MergePlan& primary() const { return fused ? *fused : *adapter; }
    const CheckpointInfo& primaryInfo(const LoraCheckpoint& lora) const { return fused ? lora.fused : lora.adapter; }
};

/// Plans `what` of `lora` with the user's `options` (dtype, shard size, config folder apply to the fused model;
/// the adapter keeps its tensors' dtypes, bit for bit, in one file). Fused without a base model is an error that
/// says to pass --base_model; Both without one writes the adapter alone, with a note.
Result<LoraMergePlans> planLoraMerge(const LoraCheckpoint& lora, const MergeOptions& options, LoraOutput what);

} // namespace tessera
