// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/diff_export.h"
#include "compare/csv_fields.h"

#include <cmath>
#include <sstream>

namespace tessera {

namespace {

/// JSON has no infinity or NaN: such values are written as the strings "inf", "-inf" and "nan".
nlohmann::json number(double v)
{
    if (std::isnan(v))
        return "nan";
    if (std::isinf(v))
        return v > 0 ? "inf" : "-inf";
    return v;
}

nlohmann::json sideJson(const SideStats& s)
{
    return { { "min", number(s.min) },   { "max", number(s.max) },   { "mean", number(s.mean) },
             { "std", number(s.std) },   { "nan", s.nan },           { "inf", s.inf },
             { "zeros", s.zeros },       { "finite", s.finite } };
}

nlohmann::json rowJsonOf(const TensorDiff& t)
{
    nlohmann::json j = { { "name", t.name },
                         { "status", diffStatusName(t.status) },
                         { "ok", diffStatusOk(t.status) },
                         { "detail", t.detail },
                         { "dtype_a", t.indexA >= 0 ? nlohmann::json(torchName(t.dtypeA)) : nlohmann::json() },
                         { "dtype_b", t.indexB >= 0 ? nlohmann::json(torchName(t.dtypeB)) : nlohmann::json() },
                         // --round_to_narrower: the dtype both sides were rounded to (bit_equal is then of those bytes)
                         { "compared_as", t.comparedAs ? nlohmann::json(torchName(*t.comparedAs)) : nlohmann::json() },
                         { "shape_a", t.indexA >= 0 ? nlohmann::json(t.shapeA) : nlohmann::json() },
                         { "shape_b", t.indexB >= 0 ? nlohmann::json(t.shapeB) : nlohmann::json() },
                         { "elements", t.elements },
                         { "compared", t.compared } };
    if (!t.compared)
        return j;
    j["bit_equal"] = t.bitEqual;
    j["differing"] = t.differing;
    j["outside_tolerance"] = t.outsideTolerance;
    j["nan_opposite"] = t.nanOpposite;
    j["missing_a"] = t.missingA;
    j["missing_b"] = t.missingB;
    if (!t.numeric)
        return j; // float8/complex: compared by bytes only
    j["max_abs_diff"] = number(t.maxAbsDiff);
    j["mean_abs_diff"] = number(t.meanAbsDiff);
    j["max_rel_diff"] = number(t.maxRelDiff);
    j["cosine"] = number(t.cosine);
    j["worst_index"] = t.worstIndex >= 0 ? nlohmann::json(unflattenIndex(static_cast<std::uint64_t>(t.worstIndex), t.shapeA))
                                         : nlohmann::json();
    j["a"] = sideJson(t.a);
    j["b"] = sideJson(t.b);
    return j;
}

} // namespace

namespace {
nlohmann::json configJson(const std::vector<ConfigDifference>& differences)
{
    auto out = nlohmann::json::array();
    for (const auto& d : differences)
        out.push_back({ { "key", d.key },
                        { "a", nlohmann::json::parse(d.a, nullptr, false) },
                        { "b", nlohmann::json::parse(d.b, nullptr, false) } });
    return out;
}
} // namespace

nlohmann::json diffRowToJson(const TensorDiff& row) { return rowJsonOf(row); }

nlohmann::json diffReportToJson(const DiffReport& report, const std::string& layoutA, const std::string& layoutB,
                                const std::vector<std::string>& warnings, bool failuresOnly)
{
    nlohmann::json counts = nlohmann::json::object();
    for (auto st : reportedDiffStatuses())
        counts[diffStatusName(st)] = report.count(st);
    auto tensors = nlohmann::json::array();
    for (const auto& t : report.tensors)
        if (!failuresOnly || !diffStatusOk(t.status))
            tensors.push_back(rowJsonOf(t));
    return { { "a", report.pathA },         { "b", report.pathB },
             { "layout_a", layoutA },       { "layout_b", layoutB },
             { "atol", report.atol },       { "rtol", report.rtol },
             { "ok", report.ok() },         { "failures", report.failures() },
             { "counts", counts },          { "warnings", warnings },
             { "config_differences", configJson(report.configDifferences) },
             { "summary", report.summary() }, { "tensors", tensors } };
}

std::string diffReportToCsv(const DiffReport& report)
{
    // The JSON row's fields, flattened ("a.min"), in a fixed order so every row has every column.
    static const char* const columns[] = { "name", "status", "ok", "detail", "dtype_a", "dtype_b", "shape_a", "shape_b",
                                           "elements", "compared", "bit_equal", "differing", "outside_tolerance",
                                           "nan_opposite", "missing_a", "missing_b", "max_abs_diff", "mean_abs_diff",
                                           "max_rel_diff", "cosine",
                                           "worst_index" };
    static const char* const sides[] = { "min", "max", "mean", "std", "nan", "inf", "zeros", "finite" };
    std::ostringstream out;
    bool first = true;
    for (const char* c : columns) {
        out << (first ? "" : ",") << c;
        first = false;
    }
    for (const char* side : { "a", "b" })
        for (const char* s : sides)
            out << "," << side << "." << s;
    out << "\r\n";
    for (const auto& t : report.tensors) {
        const nlohmann::json j = rowJsonOf(t);
        first = true;
        for (const char* c : columns) {
            out << (first ? "" : ",") << (j.contains(c) ? csvValue(j[c]) : std::string());
            first = false;
        }
        for (const char* side : { "a", "b" })
            for (const char* s : sides)
                out << "," << (j.contains(side) ? csvValue(j[side][s]) : std::string());
        out << "\r\n";
    }
    return out.str();
}

} // namespace tessera
