// SPDX-License-Identifier: GPL-3.0-or-later
// tessera drift RUN_ROOT [--steps …] [--role critic] [--json]: how every tensor of a run moved between saved steps.
// argv → DriftRequest → driftSettings() → driftRun() → non-finite tensors, damaged steps, the largest movers.

#include "cli_args.h"
#include "commands.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "compare/drift.h"
#include "compare/drift_export.h"
#include "io/printable.h"
#include "ops/drift_request.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

namespace tessera::cli {

namespace {

std::string number(const std::optional<double>& v)
{
    if (!v)
        return "-";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, *v == 0 ? "%.0f" : "%.4g", *v);
    return buffer;
}

std::string stepsText(const DriftReport& report)
{
    std::string text;
    for (const auto& s : report.steps)
        text += (text.empty() ? "" : ", ") + std::to_string(s.step);
    return text;
}

/// Every record holding NaN or Inf, step by step.
std::string nonFiniteSection(const DriftReport& report)
{
    std::string out;
    for (const auto& r : report.records)
        if (r.nonFinite())
            out += "  step " + std::to_string(r.step) + "  " + std::to_string(r.nan) + " NaN, " + std::to_string(r.inf)
                + " Inf of " + std::to_string(r.elements) + "  " + printableText(r.name) + "\n";
    return out.empty() ? out : "NaN/Inf found:\n" + out;
}

/// The `top` largest relative changes of each step, and why the others have none.
std::string moversSection(const DriftReport& report, std::size_t top)
{
    std::string out;
    for (const auto& step : report.steps) {
        std::vector<const DriftRecord*> moved;
        std::map<std::string, std::size_t> unmeasured; // why → count, for the steps after the first
        std::optional<long long> previous;
        for (const auto& r : report.records) {
            if (r.step != step.step)
                continue;
            if (r.relativeChange) {
                moved.push_back(&r);
                previous = r.previousStep;
            } else if (r.why != "first step") {
                ++unmeasured[r.why];
            }
        }
        if (moved.empty() && unmeasured.empty())
            continue;
        std::stable_sort(moved.begin(), moved.end(), [](const DriftRecord* x, const DriftRecord* y) {
            return *x->relativeChange > *y->relativeChange;
        });
        out += "\nstep " + std::to_string(step.step)
            + (previous ? " against step " + std::to_string(*previous) : std::string()) + ": largest relative changes\n";
        char line[160];
        std::snprintf(line, sizeof line, "  %12s %12s %12s  %s\n", "REL CHANGE", "MAX |dW|", "NORM", "TENSOR");
        out += line;
        for (std::size_t i = 0; i < moved.size() && i < top; ++i) {
            std::snprintf(line, sizeof line, "  %12s %12s %12s  ", number(moved[i]->relativeChange).c_str(),
                          number(moved[i]->maxAbsChange).c_str(), number(moved[i]->norm).c_str());
            out += line + printableText(moved[i]->name) + "\n";
        }
        for (const auto& [why, count] : unmeasured)
            out += "  " + std::to_string(count) + (count == 1 ? " tensor has" : " tensors have")
                + " no relative change: " + why + "\n";
    }
    return out;
}

} // namespace

int runDrift(const std::vector<std::string>& args)
{
    ArgParser parser = DriftRequest::parser();
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    const DriftRequest request = DriftRequest::fromParser(parser);
    auto options = driftSettings(request);
    if (!options)
        return reportFailure(parser, options.error().message, ExitUsage);
    const auto top = driftTopValue(request);
    TerminalProgress progress("Reading", TerminalProgress::Unit::Bytes, request.silent());
    auto report = driftRun(*options, progress);
    progress.finish();
    if (!report)
        return reportFailure(parser, report.error().message);
    if (request.json) {
        std::cout << jsonText(driftReportToJson(*report)) << "\n";
        return report->clean() ? ExitOk : ExitProblems;
    }
    std::cout << "Run " << printableText(report->root) << ": " << report->steps.size() << " steps ("
              << stepsText(*report) << "), " << report->tensors.size() << " tensors, role " << report->role << "\n";
    std::cout << nonFiniteSection(*report);
    if (!report->damaged.empty()) {
        std::cout << "Damaged steps:\n";
        for (const auto& d : report->damaged)
            std::cout << "  step " << d.step << ": " << printableText(d.problem) << "\n";
    }
    std::cout << moversSection(*report, *top);
    const std::uint64_t nonFinite = report->nonFiniteRecords();
    if (report->clean())
        std::cout << "\nOK: no NaN or Inf in " << report->steps.size() << " steps\n";
    else
        std::cout << "\nPROBLEMS: " << nonFinite << (nonFinite == 1 ? " tensor" : " tensors") << " with NaN/Inf, "
                  << report->damagedSteps() << " damaged " << (report->damagedSteps() == 1 ? "step" : "steps") << "\n";
    return report->clean() ? ExitOk : ExitProblems;
}

} // namespace tessera::cli
