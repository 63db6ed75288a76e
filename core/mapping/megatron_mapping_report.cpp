// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/megatron_mapping_report.h"
#include "io/printable.h"

#include <nlohmann/json.hpp>

namespace tessera {

namespace {

constexpr MappingStatus kStatuses[] = { MappingStatus::Ok,        MappingStatus::Tied,          MappingStatus::Ignored,
                                        MappingStatus::Unmapped,  MappingStatus::Missing,       MappingStatus::ShapeMismatch,
                                        MappingStatus::Duplicate, MappingStatus::Unexpected };

} // namespace

nlohmann::json mappingToJson(const MappingResult& result)
{
    nlohmann::json counts = nlohmann::json::object();
    for (MappingStatus s : kStatuses)
        counts[mappingStatusName(s)] = result.count(s);
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : result.rows) {
        nlohmann::json row { { "source", r.source },       { "target", r.target },
                             { "rule", r.rule },           { "rule_file", r.ruleOrigin },
                             { "transform", r.transform }, { "status", mappingStatusName(r.status) },
                             { "detail", r.detail } };
        row["source_shape"] = r.source.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.sourceShape);
        row["target_shape"] = r.target.empty() || r.status == MappingStatus::Missing ? nlohmann::json(nullptr)
                                                                                     : nlohmann::json(r.targetShape);
        row["expected_shape"] = r.expectedShape ? nlohmann::json(*r.expectedShape) : nlohmann::json(nullptr);
        rows.push_back(std::move(row));
    }
    nlohmann::json problems = nlohmann::json::array();
    for (const auto& p : result.problems)
        problems.push_back({ { "file", p.file }, { "tensor", p.tensor }, { "message", p.message } });
    return { { "family", result.family },         { "rules", result.ruleSources },
             { "config", result.configPath },     { "value_model", result.valueModel },
             { "tied_embeddings", result.tiedEmbeddings }, { "counts", counts },
             { "rows", rows },                    { "problems", problems },
             { "warnings", result.warnings } };
}

std::string mappingSummary(const MappingResult& result, bool allRows)
{
    // Source names, rule files (--param_mapping) and config paths come from other people's files: each is escaped
    // where it is put in a line, so a name cannot forge one.
    std::string s = "Mapping     " + printableText(result.family) + " rules (";
    for (std::size_t i = 0; i < result.ruleSources.size(); ++i)
        s += (i ? " + " : "") + printableText(result.ruleSources[i]);
    s += "), sizes from " + printableText(result.configPath) + "\n";
    if (result.valueModel)
        s += "            value model: output_layer becomes score.weight\n";
    s += "            embeddings " + std::string(result.tiedEmbeddings ? "tied" : "untied") + "\n";
    std::string counts;
    for (MappingStatus st : kStatuses)
        if (const std::size_t n = result.count(st))
            counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + mappingStatusName(st);
    s += "            " + std::to_string(result.mapped.tensors.size()) + " Hugging Face tensors; " + counts + "\n\n";
    bool any = false;
    for (const auto& r : result.rows) {
        if (!allRows && (r.status == MappingStatus::Ok || r.status == MappingStatus::Tied))
            continue;
        any = true;
        s += "  [" + std::string(mappingStatusName(r.status)) + "] "
             + (r.source.empty() ? "—" : printableText(r.source)) + " "
             + (r.source.empty() ? "" : shapeToString(r.sourceShape) + " ") + "→ "
             + (r.target.empty() ? "—" : printableText(r.target));
        if (!r.target.empty() && r.status != MappingStatus::Missing)
            s += " " + shapeToString(r.targetShape);
        if (!r.rule.empty())
            s += "  (" + printableText(r.rule) + ": " + printableText(r.transform) + ")";
        s += "\n";
        if (r.status != MappingStatus::Ok && !r.detail.empty())
            s += "      " + printableText(r.detail) + "\n";
    }
    if (any)
        s += "\n";
    return s;
}

} // namespace tessera
