// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// prepareMerge(): a merge request turned into everything `tessera merge` and the workbench's Merge page show and
// run — the plans (safetensors, a LoRA checkpoint's fused model and adapter, or GGUF), the messages, and what the
// merge would refuse — computed once, the same way for both.

#include "merge/gguf_plan.h"
#include "merge/merge_engine.h"
#include "ops/merge_request.h"
#include "ops/prepare_model.h"

#include <optional>
#include <vector>

namespace tessera {

struct PreparedMerge {
    MergeRequest request;
    MergeSettings settings;
    PreparedModel model;
    std::optional<GgufPlan> gguf;           ///< --format gguf
    /// --peft_target_dir: the adapter is published into its own folder after the fused model.
    bool separateAdapter = false;
    /// Why the --peft_target_dir cannot take the adapter (checked before anything is written, by every run).
    Status adapterTarget;
    /// What the merge would refuse of --target_dir, as a dry run checks it: no name, a folder it cannot complete or
    /// that holds another model's files, too little disk, another run writing it. (A real run checks it again once
    /// it holds the target's lock.) Not checked for a run in parts, whose parts check it themselves.
    Status target;
    std::optional<Refusal> refusal;         ///< the merge cannot be planned (the model's refusal included)
    /// What --target_dir already holds that this merge would replace (its own names: the model or GGUF file of an
    /// earlier run) and what it neither writes nor replaces (another tool's files, notes): kept as they are, but
    /// never silently — the command line lists them, the workbench asks first. Sorted names of the folder's entries.
    std::vector<std::string> replacedFiles;
    std::vector<std::string> otherFiles;

    /// Planned and nothing refuses it: what a Merge button may run.
    bool runnable() const { return !refusal && adapterTarget && target; }
    /// The models written into --target_dir (the adapter too, unless separateAdapter).
    std::vector<MergeOutput> outputs() const;
    /// The adapter published into --peft_target_dir, when separateAdapter.
    std::optional<MergeOutput> adapterOutput() const;
    /// The tensors and bytes a run writes (every output, or the GGUF file), for progress.
    std::size_t tensorCount() const;
    std::uint64_t byteCount() const;
};

/// Checks `request` and prepares it: the model read and planned as `merge` writes it, then the target checked.
/// `context` brings scans already made and the progress of new ones (cancel stops them).
PreparedMerge prepareMerge(const MergeRequest& request, const PrepareContext& context = {},
                           const EnvLookup& env = processEnvironment());

/// Runs `prepared` (runnable() but for `target`, which the run checks again): the models into --target_dir
/// atomically, then the adapter into --peft_target_dir, or the GGUF file. `options` brings progress, cancel and
/// notes; its thread count and replica check are taken from the request.
Result<MergeOutcome> runPreparedMerge(const PreparedMerge& prepared, MergeRunOptions options);

} // namespace tessera
