// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

/// Each headless command takes its arguments (after the command name) and returns the process exit code:
/// 0 success, 1 problems found or the operation failed, 2 bad usage.
int runInspect(const std::vector<std::string>& args);
int runMerge(const std::vector<std::string>& args);
int runTest(const std::vector<std::string>& args);
int runDiff(const std::vector<std::string>& args);
int runSplit(const std::vector<std::string>& args);
int runDrift(const std::vector<std::string>& args);

} // namespace tessera::cli
