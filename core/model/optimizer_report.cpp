// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/optimizer_report.h"

#include "io/printable.h"

#include <nlohmann/json.hpp>

#include <sstream>

namespace tessera {

namespace {

/// "27 tensors (exp_avg 9, exp_avg_sq 9, fp32_param 9) for 9 parameters"
std::string counts(const OptimizerState& o)
{
    std::string kinds;
    for (const auto& [kind, n] : o.kinds)
        kinds += (kinds.empty() ? "" : ", ") + printableText(kind) + " " + std::to_string(n);
    std::string out = std::to_string(o.tensors.size()) + (o.tensors.size() == 1 ? " tensor" : " tensors");
    if (!kinds.empty())
        out += " (" + kinds + ")";
    if (o.parameters)
        out += " for " + std::to_string(o.parameters) + (o.parameters == 1 ? " parameter" : " parameters");
    if (o.otherEntries)
        out += ", " + std::to_string(o.otherEntries) + " other entries";
    return out;
}

} // namespace

nlohmann::json optimizerToJson(const OptimizerState& o)
{
    if (!o.present())
        return nullptr;
    nlohmann::json j = { { "layout", optimizerLayoutName(o.layout) },
                         { "tensors", o.tensors.size() },
                         { "kinds", o.kinds },
                         { "parameters", o.parameters },
                         { "other_entries", o.otherEntries },
                         { "master_weights", bool(o.masterWeights) } };
    if (!o.shardingType.empty()) {
        j["sharding_type"] = o.shardingType;
        j["sharding_source"] = o.shardingSource;
    }
    if (!o.masterWeights && !o.noMasterWeights.empty())
        j["no_master_weights"] = o.noMasterWeights;
    auto names = nlohmann::json::array();
    for (const auto& t : o.tensors)
        names.push_back(t.name);
    j["keys"] = names;
    auto problems = nlohmann::json::array();
    for (const auto& p : o.problems)
        problems.push_back(p.text());
    j["problems"] = problems;
    return j;
}

std::string optimizerSummary(const OptimizerState& o)
{
    if (!o.present())
        return "";
    std::ostringstream out;
    const char* layout = optimizerLayoutName(o.layout);
    out << "Optimizer   " << (*layout ? std::string(layout) + ": " : std::string()) << counts(o) << "\n";
    if (!o.shardingType.empty())
        out << "            sharding type " << printableText(o.shardingType) << " (" << o.shardingSource << ")\n";
    out << "            master weights: "
        << (o.masterWeights ? std::string("yes, merge them with --weights_from optimizer")
                            : "none (" + o.noMasterWeights + ")")
        << "\n";
    if (!o.problems.empty()) {
        out << "            " << o.problems.size() << (o.problems.size() == 1 ? " problem" : " problems")
            << " in its tensors (not the model's):\n";
        for (const auto& p : o.problems)
            out << "  - " << p.text() << "\n";
    }
    return out.str();
}

} // namespace tessera
