// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare/training_report.h"

#include "formats/optimizer_keys.h"
#include "io/printable.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace tessera {

namespace {

std::string counted(std::size_t n, const char* noun)
{
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string hyperParametersText(const TrainingState& s)
{
    std::string text;
    for (const auto& [name, value] : s.hyperParameters)
        text += (text.empty() ? "" : ", ") + name + " " + value;
    if (s.paramGroups > 1)
        text += " (the first of " + std::to_string(s.paramGroups) + " param groups)";
    return text;
}

std::string stepsText(const TrainingState& s)
{
    const auto steps = adamSteps(s);
    if (steps.empty())
        return "none saved";
    if (steps.size() == 1)
        return stepText(steps.front());
    return stepText(steps.front()) + " to " + stepText(steps.back()) + " (the parameters were not stepped alike)";
}

std::string schedulerText(const TrainingState& s)
{
    if (!s.hasExtraState())
        return "none (no extra_state_world_size_" + std::to_string(s.worldSize) + "_rank_R.pt)";
    if (!s.lrScheduler)
        return "no lr_scheduler in the extra state";
    return s.schedulerPosition.empty() ? "saved" : s.schedulerPosition;
}

std::string completeText(const TrainingState& s)
{
    if (!s.problems.empty())
        return "no: " + counted(s.problems.size(), "problem") + " (below)";
    if (!s.hasOptimizer() || !s.hasExtraState())
        return std::string("no: ") + (s.hasOptimizer() ? "no extra state (scheduler, RNG)" : "no optimizer state")
            + "; verl's default resume loads the model, optimizer and extra state (" + kModelOnlyResumeSetting
            + " loads the model alone)";
    return "yes: the optimizer and extra state of all " + std::to_string(s.worldSize)
        + " ranks, matching the model's parameters";
}

std::string otherRolesText(const TrainingState& s)
{
    std::string text;
    for (const auto& role : s.otherRoles)
        text += (text.empty() ? "" : ", ") + fs::path(role).filename().string() + "/";
    return text + " beside it, with a training state of its own (inspect it there)";
}

/// A DCP folder's training state (torchtitan's): its entries counted by what they belong to.
std::vector<TrainingFact> dcpTrainingFacts(const TrainingState& s)
{
    const DcpTrainingEntries& d = *s.dcp;
    std::map<std::string, std::size_t> byEntry;
    for (const auto& t : d.tensors.tensors)
        ++byEntry[torchtitanStateEntry(t.name)];
    for (const auto& b : d.bytes)
        ++byEntry[torchtitanStateEntry(b.fqn).empty() ? std::string("other") : torchtitanStateEntry(b.fqn)];
    std::string entries;
    for (const auto& [entry, n] : byEntry)
        entries += (entries.empty() ? "" : ", ") + entry + " " + std::to_string(n);
    return { { "Entries", counted(d.tensors.tensors.size(), "tensor") + " and " + std::to_string(d.bytes.size()) + (d.bytes.size() == 1 ? " other entry" : " other entries")
                              + " besides the model (" + entries + ")" },
             { "Reshard", "tessera split --format dcp carries them to another number of ranks (the dataloader's "
                          "only to the same number, as torchtitan reads it)" },
             { "Complete", s.problems.empty() ? std::string("yes") : "no: " + counted(s.problems.size(), "problem")
                                                                           + " (below)" } };
}

} // namespace

std::vector<double> adamSteps(const TrainingState& state)
{
    std::set<double> steps;
    for (const auto& p : state.parameters)
        if (p.step)
            steps.insert(*p.step);
    return { steps.begin(), steps.end() };
}

std::string stepText(double step)
{
    if (std::isfinite(step) && step == std::floor(step) && std::fabs(step) < 1e15)
        return std::to_string(static_cast<long long>(step));
    std::ostringstream out;
    out << step;
    return out.str();
}

std::vector<TrainingFact> trainingStateFacts(const TrainingState& s)
{
    if (s.dcp)
        return dcpTrainingFacts(s);
    if (!s.uncarried.empty())
        return { { "Optimizer", s.uncarried }, { "Reshard", "tessera split does not carry it from this layout (it "
                                                            "refuses, naming it, unless --model_only)" } };
    std::vector<TrainingFact> facts;
    if (s.hasOptimizer()) {
        facts.push_back({ "Optimizer", s.optimizerKind.empty() ? "unreadable" : s.optimizerKind });
        if (!s.hyperParameters.empty())
            facts.push_back({ "Settings", hyperParametersText(s) });
        facts.push_back({ "Parameters", std::to_string(s.parameters.size()) + " with state, of "
                                            + std::to_string(s.optimizerParameters) + " in "
                                            + counted(s.paramGroups, "param group") });
        facts.push_back({ "Adam step", stepsText(s) });
    } else {
        facts.push_back({ "Optimizer", "none (no optim_world_size_" + std::to_string(s.worldSize) + "_rank_R.pt)" });
    }
    facts.push_back({ "Scheduler", schedulerText(s) });
    facts.push_back({ "RNG state", s.rng ? "saved (extra state of each rank)" : "not saved" });
    facts.push_back({ "Dataloader", s.dataFile.empty() ? "no data.pt beside the actor folder" : s.dataFile });
    if (!s.otherRoles.empty())
        facts.push_back({ "Other roles", otherRolesText(s) });
    facts.push_back({ "Complete", completeText(s) });
    return facts;
}

std::string trainingStateSummary(const TrainingState& s)
{
    std::ostringstream out;
    out << "Training state (" << printableText(s.actorDir) << ", world size " << s.worldSize << ")\n";
    for (const auto& fact : trainingStateFacts(s)) {
        std::string label = fact.label;
        label.resize(std::max<std::size_t>(label.size() + 1, 12), ' ');
        out << label << printableText(fact.value) << "\n";
    }
    for (const auto& problem : s.problems)
        out << "  - " << printableText(problem.text()) << "\n";
    return out.str();
}

nlohmann::json trainingStateToJson(const TrainingState& s, const TrainingNorms* norms)
{
    nlohmann::json j;
    j["actor_dir"] = s.actorDir;
    j["world_size"] = s.worldSize;
    if (s.hasOptimizer()) {
        nlohmann::json o;
        o["kind"] = s.optimizerKind;
        auto hyper = nlohmann::json::object();
        for (const auto& [name, value] : s.hyperParameters)
            hyper[name] = value;
        o["hyper_parameters"] = hyper;
        o["param_groups"] = s.paramGroups;
        o["parameters_in_groups"] = s.optimizerParameters;
        o["parameters_with_state"] = s.parameters.size();
        const auto steps = adamSteps(s);
        o["step"] = steps.size() == 1 ? nlohmann::json(steps.front()) : nlohmann::json();
        o["steps"] = steps;
        o["files"] = s.optimizer->info.files;
        j["optimizer"] = o;
    } else {
        j["optimizer"] = nullptr;
    }
    j["extra_state_files"] = s.extraStateFiles;
    j["scheduler"] = s.lrScheduler ? nlohmann::json { { "position", s.schedulerPosition },
                                                      { "state", s.lrScheduler->repr(3) } }
                                   : nlohmann::json();
    j["rng"] = s.rng;
    j["data_file"] = s.dataFile.empty() ? nlohmann::json() : nlohmann::json(s.dataFile);
    j["other_roles"] = s.otherRoles;
    j["complete"] = s.problems.empty() && ((s.hasOptimizer() && s.hasExtraState()) || s.dcp);
    if (s.dcp) {
        j["dcp_tensors"] = s.dcp->tensors.tensors.size();
        j["dcp_other_entries"] = s.dcp->bytes.size();
    }
    auto problems = nlohmann::json::array();
    for (const auto& p : s.problems)
        problems.push_back(p.text());
    j["problems"] = problems;
    if (norms) {
        auto rows = nlohmann::json::array();
        for (const auto& r : norms->parameters) {
            auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
            nlohmann::json row { { "index", r.index }, { "parameter", r.parameter }, { "shape", r.shape },
                                 { "step", optional(r.step) }, { "exp_avg_norm", optional(r.expAvgNorm) },
                                 { "exp_avg_sq_sqrt_norm", optional(r.expAvgSqRootNorm) } };
            if (!r.note.empty())
                row["note"] = r.note;
            rows.push_back(std::move(row));
        }
        j["norms"] = rows;
    }
    return j;
}

std::vector<const ParameterNorms*> extremeNorms(const TrainingNorms& norms, std::size_t count)
{
    std::vector<const ParameterNorms*> rows;
    for (const auto& r : norms.parameters)
        if (r.expAvgNorm)
            rows.push_back(&r);
    std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return *a->expAvgNorm > *b->expAvgNorm; });
    if (rows.size() > 2 * count)
        rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(count), rows.end() - static_cast<std::ptrdiff_t>(count));
    return rows;
}

namespace {

std::string normCell(const std::optional<double>& v)
{
    char buffer[32];
    if (!v)
        return "-";
    std::snprintf(buffer, sizeof buffer, "%.6g", *v);
    return buffer;
}

std::string normRow(const ParameterNorms& r)
{
    char line[96];
    std::snprintf(line, sizeof line, "  %12s  %14s  %6s  %-12s  ", normCell(r.expAvgNorm).c_str(),
                  normCell(r.expAvgSqRootNorm).c_str(), r.step ? stepText(*r.step).c_str() : "-",
                  shapeToString(r.shape).c_str());
    return line + printableText(r.parameter) + "\n";
}

} // namespace

std::string trainingNormsText(const TrainingNorms& norms, bool all, std::size_t count)
{
    std::ostringstream out;
    const auto shown = extremeNorms(norms, count);
    const bool everyRow = all || shown.size() == norms.parameters.size();
    out << "Optimizer norms (" << counted(norms.parameters.size(), "parameter") << ", "
        << (everyRow ? "in model order" : "the " + std::to_string(count) + " largest and smallest by ‖exp_avg‖; "
                                              "--tensors lists all")
        << ")\n";
    out << "    ‖exp_avg‖₂  ‖√exp_avg_sq‖₂    step  shape         parameter\n";
    if (everyRow) {
        for (const auto& r : norms.parameters)
            out << normRow(r);
    } else {
        for (std::size_t i = 0; i < shown.size(); ++i)
            out << (i == count ? "  …\n" : "") << normRow(*shown[i]);
    }
    for (const auto& r : norms.parameters)
        if (!r.note.empty())
            out << "  - " << printableText(r.parameter) << ": " << printableText(r.note) << "\n";
    return out.str();
}

} // namespace tessera
