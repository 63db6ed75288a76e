// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera merge --format gguf`: the scanned checkpoint written as one GGUF file for llama.cpp.

#include "merge_common.h"

namespace tessera::cli {

/// Adds --format and --outtype to `tessera merge`.
void addGgufMergeOptions(ArgParser& parser);

/// True when the command line asks for GGUF; a --format other than safetensors or gguf is reported (exit code set).
bool wantsGguf(const ArgParser& parser, int& exitCode);

/// Plans and writes the GGUF file (or prints the plan for --dry-run). Returns the exit code.
int runGgufMerge(const ArgParser& parser, MergeSetup& setup);

} // namespace tessera::cli
