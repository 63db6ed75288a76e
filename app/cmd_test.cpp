// SPDX-License-Identifier: GPL-3.0-or-later
// tessera test --local_dir D --test_hf_dir R: merge in memory and compare with a reference model.
// argv → TestRequest → prepareTest() → runPreparedTest() → the report, printed.

#include "cli_args.h"
#include "commands.h"
#include "merge_common.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "ops/prepare_test.h"

#include <nlohmann/json.hpp>

#include <iostream>

namespace tessera::cli {

namespace {

void printReport(const TestRequest& request, const CompareReport& report)
{
    if (!request.json) {
        std::cout << report.text(request.failuresOnly);
        return;
    }
    auto tensors = nlohmann::json::array();
    for (const auto& t : report.tensors)
        tensors.push_back({ { "name", t.name }, { "equal", t.verdict == TensorComparison::Verdict::Equal },
                            { "detail", t.detail }, { "mismatches", t.mismatches },
                            { "max_abs_diff", t.maxAbsDiff }, { "note", t.note } });
    std::cout << jsonText({ { "reference", report.reference }, { "ok", report.ok() },
                            { "failures", report.failures() }, { "tensors", tensors } })
              << "\n";
}

} // namespace

int runTest(const std::vector<std::string>& args)
{
    ArgParser parser = TestRequest::parser();
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    const TestRequest request = TestRequest::fromParser(parser);
    if (const Status valid = request.validate(); !valid)
        return reportFailure(parser, valid.error().message, ExitUsage);
    DebugLog debug(request.debug);
    const PreparedTest prepared = prepareForCommand("test", request, debug, [](const auto& r, const PrepareContext& c) {
        return prepareTest(r, c);
    });
    if (prepared.refusal)
        return reportRefusal(parser, *prepared.refusal);
    TerminalProgress progress("Comparing", TerminalProgress::Unit::Bytes, request.silent());
    auto report = runPreparedTest(prepared, progress);
    progress.finish();
    debug.stage("compare");
    if (!report)
        return reportFailure(parser, report.error().message);
    printReport(request, *report);
    return report->ok() ? ExitOk : ExitProblems;
}

} // namespace tessera::cli
