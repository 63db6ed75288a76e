// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "merge/merge_plan.h"
#include "model/checkpoint.h"
#include "pickle/dcp_metadata_writer.h"
#include "progress.h"
#include "result.h"
#include "split/split_plan.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera {

/// How to run a split.
struct SplitRunOptions {
    unsigned threads = 0;                           ///< files written at once; 0 = one per core
    bool sync = true;                               ///< fdatasync the files before publishing them
    Progress* progress = nullptr;                   ///< bytes written of SplitPlan::totalBytes; asked isCanceled()
    const std::atomic<bool>* cancel = nullptr;      ///< the workbench's cancel flag
    std::function<void(const std::string&)> onNote; ///< things done besides the split, as they happen
    /// Progress of a write that is part of a larger one: bytes already done before it, and the whole (0 = its own).
    std::uint64_t progressBase = 0;
    std::uint64_t progressTotal = 0;
};

/// What a finished split did.
struct SplitOutcome {
    std::string outputDir;
    std::vector<std::string> files;   ///< paths written, relative to outputDir
    std::uint64_t bytesWritten = 0;   ///< tensor bytes
    double seconds = 0;
    std::vector<std::string> notes;
};

/// The (offset, length) of every DCP item written, per output file (empty for state-dict files): what .metadata
/// is written from.
using SplitItems = std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>>;

/// Writes the output files of `plan` (all, or with `onlyFiles` the flagged ones) into the existing folder `dir`,
/// streaming each model tensor once; returns the DCP items written. Not atomic: runSplit() and runSplitPart() are.
Result<SplitItems> writeSplitFiles(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                                   const std::string& dir, const SplitRunOptions& options,
                                   const std::vector<bool>* onlyFiles);

/// What writeTrainingFiles() wrote: its files (relative to the target) and, for a DCP split, the .metadata records
/// of its entries.
struct TrainingWritten {
    std::vector<std::string> files;
    std::vector<DcpTensorRecord> tensors;
    std::vector<DcpBytesRecord> bytes;
};

/// Writes what completes a split folder whose data files are written: the DCP .metadata (listing `training`'s
/// entries too), the generated files and pickles, the config and tokenizer files. Returns every file of the split,
/// relative to `dir`.
Result<std::vector<std::string>> finishSplitFolder(const MergePlan& model, const SplitPlan& plan,
                                                   const std::string& dir, const SplitItems& items,
                                                   const TrainingWritten* training = nullptr);

/// Sets verl's latest_checkpointed_iteration.txt above a published target, when the plan asks for it.
Status recordRunIteration(const SplitPlan& plan, const std::string& outputDir, const SplitRunOptions& options,
                          std::vector<std::string>& notes);

/// Refuses, before anything is written, a target the split cannot complete: not a folder, not writable, a folder
/// the split reads (or one holding or inside it), a checkpoint (or any file the split would write) already there,
/// too little free disk. --dry-run uses it too.
Status checkSplitTarget(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                        const std::string& targetDir);

/// Writes the training state of `plan` (if any) into `dir`: the optimizer files, streamed as the model's are, and
/// the extra state files, each an old rank's under its new name; for DCP the training tensors' items and the
/// non-tensor entries' bytes.
Result<TrainingWritten> writeTrainingFiles(const SplitPlan& plan, const std::string& dir,
                                           const SplitRunOptions& options);

/// Before the target is published: copies the dataloader state beside it, when the plan carries it.
Status carryDataFile(const SplitPlan& plan, const SplitRunOptions& options, std::vector<std::string>& notes);

/// The whole split: every model tensor of `model` (read from `info`, the checkpoint or Hugging Face folder
/// it was planned from) is assembled once, in model order, and its boxes appended to every output file that
/// holds one, so memory stays within about twice the largest tensor whatever the number of ranks. Everything
/// is written into a hidden temporary folder and published when complete; on any error, cancel or kill the
/// target is left as it was.
Result<SplitOutcome> runSplit(const CheckpointInfo& info, const MergePlan& model, const SplitPlan& plan,
                              const std::string& targetDir, const SplitRunOptions& options);

} // namespace tessera
