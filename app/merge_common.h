// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What `tessera merge` and `tessera test` share: verl's flags, and scanning the checkpoint they name.

#include "cli_args.h"
#include "debug_log.h"

#include "model/checkpoint.h"
#include "mapping/lora.h"
#include "merge/lora_plan.h"
#include "merge/merge_plan.h"

#include <optional>

namespace tessera::cli {

/// Adds the flags both commands take (--backend, --local_dir, --hf_model_path, --dtype, --threads, --json,
/// --quiet and verl's compatibility switches).
void addCommonMergeOptions(ArgParser& parser);

/// The scanned checkpoint and the options parsed from the shared flags.
struct MergeSetup {
    int exitCode = -1;                  ///< ≥ 0: stop and return this (the error is printed already)
    std::optional<CheckpointInfo> info;
    MergeOptions options;
    unsigned threads = 0;
    std::optional<LoraCheckpoint> lora; ///< set for a LoRA checkpoint (info then holds its tensors as scanned)
    LoraOutput loraOutput = LoraOutput::Both;
    std::vector<MappingRow> mappingRows; ///< a Megatron checkpoint's mapping table, for --debug and the report
    DebugLog debug;                     ///< --debug
};

/// What a merge writes: one model, or a LoRA checkpoint's fused model and adapter.
struct PlannedMerge {
    std::optional<MergePlan> plan;      ///< an ordinary checkpoint
    std::optional<LoraMergePlans> lora; ///< a LoRA checkpoint
    /// The models and where they go, for mergeCheckpoints(); they point into `setup` and this object.
    std::vector<MergeOutput> outputs(const MergeSetup& setup) const;
    /// The model a test compares with the reference: the fused one when there is one, else the adapter.
    const MergePlan& primary() const { return plan ? *plan : lora->primary(); }
    const CheckpointInfo& primaryInfo(const MergeSetup& setup) const
    {
        return plan ? *setup.info : lora->primaryInfo(*setup.lora);
    }
};

/// Plans the merge `setup` describes; the error is the user's to read.
Result<PlannedMerge> planSetup(MergeSetup& setup);

/// Validates the shared flags and scans --local_dir; `command` prefixes messages.
MergeSetup prepareMerge(const ArgParser& parser, const std::string& command);

} // namespace tessera::cli
