// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// prepareDiff(): a diff request turned into the two sides as compared (Hugging Face names: Megatron mapped with
// their config folders, a LoRA checkpoint as its fused model), what their scans and mappings found, and whether
// they are the same model — the same for `tessera diff` and the workbench's Diff page.

#include "compare/tensor_diff.h"
#include "ops/diff_request.h"
#include "ops/prepare_model.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct PreparedDiff {
    DiffRequest request;
    DiffOptions options;
    std::vector<ScannedCheckpoint> scans;      ///< scans this prepare read itself
    std::shared_ptr<const CheckpointInfo> a;   ///< as compared
    std::shared_ptr<const CheckpointInfo> b;
    /// The sides' problems (a few of one tensor's listed, the rest counted), mapping warnings and LoRA notes, each
    /// prefixed with its side ("A: …").
    std::vector<std::string> warnings;
    /// "A and B are different models: …" when their config.json files disagree on what the model is; else empty.
    std::string models;
    std::optional<Refusal> refusal;
};

/// Checks `request`, reads both sides (a scan in `context` is used when it is the same path read the same way;
/// every side is checked against its config.json as inspect checks it) and names their tensors as a merge would.
PreparedDiff prepareDiff(const DiffRequest& request, const PrepareContext& context = {});

/// Compares the prepared sides tensor by tensor (diffCheckpoints()).
Result<DiffReport> runPreparedDiff(const PreparedDiff& prepared, Progress& progress = silentProgress(),
                                   const DiffRowSink& onRow = {});

} // namespace tessera
