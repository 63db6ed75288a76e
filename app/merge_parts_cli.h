// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera merge --part K/N | auto [--parts N]` (also with --format gguf) and `tessera merge --status TARGET`: one
// merge split across processes (see core/merge/merge_parts.h, gguf_parts.h), as the command line runs and reports it.

#include "cli_args.h"
#include "merge_common.h"

#include "merge/gguf_plan.h"
#include "merge/merge_engine.h"
#include "split/split_plan.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::cli {

/// Adds --part, --parts and --status to `tessera merge` and `tessera split`.
void addPartOptions(ArgParser& parser);

/// Checks the part flags before anything is read: an exit code when the command must stop (usage error printed),
/// nullopt to go on. Also runs --status, which needs nothing else.
std::optional<int> checkPartFlags(const ArgParser& parser);

/// True when this run is one part of a split merge.
bool isPartRun(const ArgParser& parser);

/// Runs (or with --dry-run, shows) this process's part of the merge of `outputs` into `target`.
int runMergePartCommand(const ArgParser& parser, MergeSetup& setup, const std::vector<MergeOutput>& outputs,
                        const std::string& target);

/// Runs (or with --dry-run, shows) this process's part of the GGUF export `plan` into `target`: byte ranges of its
/// one file, the header and generated tensors written by the part that completes the set.
int runGgufPartCommand(const ArgParser& parser, MergeSetup& setup, const GgufPlan& plan, const std::string& target);

/// Runs (or with --dry-run, shows) this process's part of a split: the output files assigned to it.
int runSplitPartCommand(const ArgParser& parser, const CheckpointInfo& info, const MergePlan& model,
                        const SplitPlan& plan, const std::string& target);

} // namespace tessera::cli
