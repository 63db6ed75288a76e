// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What `tessera merge` and `tessera test` share: verl's flags, and scanning the checkpoint they name.

#include "cli_args.h"

#include "model/checkpoint.h"
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
};

/// Validates the shared flags and scans --local_dir; `command` prefixes messages.
MergeSetup prepareMerge(const ArgParser& parser, const std::string& command);

} // namespace tessera::cli
