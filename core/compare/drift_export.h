// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A drift report as files: the JSON `tessera drift --json` prints (the workbench's Run page exports the same), and a
// CSV with one row per tensor and step.

#include "compare/drift.h"

#include <nlohmann/json.hpp>

#include <string>

namespace tessera {

/// {"root", "role", "steps": [10, 20, …], "records": [{"name", "step", "previous_step", "dtype", "shape",
/// "relative_change", "max_abs_change", "norm", "nan", "inf", "why"}, …], "damaged": [{"step", "problem"}, …],
/// "clean"}; a value that is not known is null ("why" says why the change is).
nlohmann::json driftReportToJson(const DriftReport& report);

/// The records as CSV (RFC 4180 quoting), the JSON record's fields as columns.
std::string driftReportToCsv(const DriftReport& report);

} // namespace tessera
