// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// prepareSplit(): a split request turned into the model it writes (what a merge of the source writes, a LoRA
// checkpoint's fused model), the layout's plan, and what the split would refuse of its target — the same for
// `tessera split` and the workbench's Split page.

#include "ops/prepare_model.h"
#include "ops/split_request.h"
#include "split/split_engine.h"
#include "split/split_plan.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct PreparedSplit {
    SplitRequest request;
    SplitSettings settings;
    PreparedModel model;
    std::optional<SplitPlan> plan;
    /// What the split would refuse of --target_dir, as a dry run checks it (not for a run in parts).
    Status target;
    std::optional<Refusal> refusal;
    /// What --target_dir already holds (the split replaces nothing, so only what the target check let through):
    /// kept as it is, but never silently — the command line lists it, the workbench asks first. Sorted names.
    std::vector<std::string> otherFiles;

    bool runnable() const { return !refusal && target; }
};

/// Checks `request` and prepares it: the model read and planned (as a merge plans it), then laid out.
PreparedSplit prepareSplit(const SplitRequest& request, const PrepareContext& context = {},
                           const EnvLookup& env = processEnvironment());

/// Writes the prepared split into --target_dir (runSplit()).
Result<SplitOutcome> runPreparedSplit(const PreparedSplit& prepared, const SplitRunOptions& options);

} // namespace tessera
