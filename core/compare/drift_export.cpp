// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/drift_export.h"

#include "compare/csv_fields.h"

#include <sstream>

namespace tessera {

namespace {

template <typename T>
nlohmann::json orNull(const std::optional<T>& value)
{
    return value ? nlohmann::json(*value) : nlohmann::json();
}

nlohmann::json recordJson(const DriftRecord& r)
{
    return { { "name", r.name },
             { "step", r.step },
             { "previous_step", orNull(r.previousStep) },
             { "dtype", std::string(torchName(r.dtype)) },
             { "shape", r.shape },
             { "relative_change", orNull(r.relativeChange) },
             { "max_abs_change", orNull(r.maxAbsChange) },
             { "norm", orNull(r.norm) },
             { "nan", r.nan },
             { "inf", r.inf },
             { "why", r.why.empty() ? nlohmann::json() : nlohmann::json(r.why) } };
}

} // namespace

nlohmann::json driftReportToJson(const DriftReport& report)
{
    auto steps = nlohmann::json::array();
    for (const auto& s : report.steps)
        steps.push_back(s.step);
    auto records = nlohmann::json::array();
    for (const auto& r : report.records)
        records.push_back(recordJson(r));
    auto damaged = nlohmann::json::array();
    for (const auto& d : report.damaged)
        damaged.push_back({ { "step", d.step }, { "problem", d.problem } });
    return { { "root", report.root }, { "role", report.role },       { "steps", steps },
             { "records", records },  { "damaged", damaged },        { "clean", report.clean() } };
}

std::string driftReportToCsv(const DriftReport& report)
{
    static const char* const columns[] = { "name", "step", "previous_step", "dtype", "shape", "relative_change",
                                           "max_abs_change", "norm", "nan", "inf", "why" };
    std::ostringstream out;
    for (const char* c : columns)
        out << (c == columns[0] ? "" : ",") << c;
    out << "\r\n";
    for (const auto& r : report.records) {
        const nlohmann::json j = recordJson(r);
        for (const char* c : columns)
            out << (c == columns[0] ? "" : ",") << csvValue(j[c]);
        out << "\r\n";
    }
    return out.str();
}

} // namespace tessera
