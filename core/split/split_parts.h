// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera split --part K/N`: one split across N processes, through the same part run as a merge's parts
// (publish/part_run.h): every process plans the same split, writes only the output files assigned to it (whole
// files: a rank file is written as one stream) into the shared folder, and records them; the part that completes
// the set writes the DCP .metadata, the generated and config files, and publishes the folder.

#include "merge/merge_plan.h"
#include "model/checkpoint.h"
#include "publish/part_run.h"
#include "result.h"
#include "split/split_engine.h"
#include "split/split_plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// Which part writes which output file.
struct SplitPartsPlan {
    unsigned parts = 1;
    std::string id;                      ///< names the set: the model's identity (merge/output_identity.h), the
                                         ///< split's files and the assignment
    std::vector<unsigned> owner;         ///< per SplitPlan::files: the part that writes it
    std::vector<std::uint64_t> shareBytes;
    std::uint64_t totalBytes = 0;
};

/// Cuts the output files, in order, into `parts` contiguous runs of about equal bytes.
Result<SplitPartsPlan> planSplitParts(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                                      unsigned parts);

/// What one part of a split did (see publish/part_run.h).
struct SplitPartOutcome : PartRunOutcome {
    std::size_t filesWritten = 0;
    std::string outputDir;
};

/// Runs part `part` of the split into `targetDir`: idempotent, the target untouched until the last part publishes.
Result<SplitPartOutcome> runSplitPart(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                                      const SplitPartsPlan& parts, unsigned part, const std::string& targetDir,
                                      const SplitRunOptions& options);

} // namespace tessera
