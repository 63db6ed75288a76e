// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A diff report as files: the JSON `tessera diff --json` prints (the workbench's Export… writes the same), and a
// CSV with one row per tensor for spreadsheets.

#include "compare/tensor_diff.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tessera {

/// One tensor's row: name, status, dtypes, shapes and, when compared, every statistic. JSON has no infinity or
/// NaN, so those are the strings "inf", "-inf" and "nan".
nlohmann::json diffRowToJson(const TensorDiff& row);

/// The whole report: paths, layouts, tolerances, verdict, counts per status, warnings, summary and the rows
/// (only the failing ones with `failuresOnly`).
nlohmann::json diffReportToJson(const DiffReport& report, const std::string& layoutA, const std::string& layoutB,
                                const std::vector<std::string>& warnings, bool failuresOnly = false);

/// The rows as CSV (RFC 4180 quoting), the JSON's per-tensor fields as columns.
std::string diffReportToCsv(const DiffReport& report);

} // namespace tessera
