// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The command line's side of parsing: exit codes, usage errors and --help on the terminal. The parser itself and
// the requests it fills are in core/ops.

#include "ops/arg_parser.h"
#include "ops/option_values.h"
#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::cli {

/// Exit codes shared by every command.
enum ExitCode { ExitOk = 0, ExitProblems = 1, ExitUsage = 2 };

/// --threads of a command without a request (inspect): 0 when not given (one per core), else 1 to kMaxThreads.
Result<unsigned> threadsOption(const ArgParser& parser);

/// Prints "<program> <command>: <error>" and a hint to stderr; returns ExitUsage.
int usageError(const ArgParser& parser);

/// Parses a command's `args`: on a usage error reports it as usageError() does, on --help prints the help text
/// to stdout. Returns the exit code when the command has nothing more to do, std::nullopt when it should run.
std::optional<int> parseCommandLine(ArgParser& parser, const std::vector<std::string>& args);

} // namespace tessera::cli
