// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera merge --part K/N | auto [--parts N]` (also with --format gguf) and `tessera merge --status TARGET`: one
// merge split across processes (see core/merge/merge_parts.h, gguf_parts.h), as the command line runs and reports it.

#include "cli_args.h"
#include "debug_log.h"

#include "ops/part_spec.h"
#include "ops/prepare_merge.h"
#include "split/split_plan.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::cli {

/// --status TARGET [--discard]: which parts of a run in parts into TARGET are done and which are missing.
int runPartStatus(const ArgParser& parser);

/// Runs (or with --dry-run, shows) this process's part (the request's --part) of the prepared merge or GGUF export.
int runMergePartCommand(const ArgParser& parser, const PreparedMerge& prepared, DebugLog& debug);

/// Runs (or with --dry-run, shows) this process's part of a split: the output files assigned to it.
int runSplitPartCommand(const ArgParser& parser, const PartSpec& spec, const CheckpointInfo& info,
                        const MergePlan& model, const SplitPlan& plan, const std::string& target);

} // namespace tessera::cli
