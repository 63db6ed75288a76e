// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera merge --format gguf`: what the command line prints of the one GGUF file for llama.cpp.

#include "cli_args.h"

#include "merge/gguf_plan.h"
#include "ops/merge_request.h"

namespace tessera::cli {

/// --dry-run of a GGUF export (its target already checked): the plan as text or JSON. Returns the exit code.
int printGgufDryRun(const ArgParser& parser, const GgufPlan& plan);

/// What a finished GGUF export wrote.
void printGgufExported(const MergeRequest& request, const GgufPlan& plan, const MergeOutcome& outcome);

} // namespace tessera::cli
