// SPDX-License-Identifier: GPL-3.0-or-later
// tessera test --local_dir D --test_hf_dir R: merge in memory and compare with a reference model.

#include "cli_args.h"
#include "commands.h"
#include "merge_common.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "merge/merge_plan.h"
#include "compare/model_compare.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>

namespace tessera::cli {

int runTest(const std::vector<std::string>& args)
{
    ArgParser parser("test", "--local_dir DIR --test_hf_dir DIR [--atol A --rtol R]",
                     "Merge a checkpoint in memory, tensor by tensor, and compare it with a Hugging Face reference\n"
                     "model: names, shapes, dtypes and values (bit-exact unless a tolerance is given). Writes nothing.\n"
                     "Prints one line per tensor and exits with 1 on any difference.");
    addCommonMergeOptions(parser);
    parser.addOption("test_hf_dir", "DIR", "the reference model folder (model.safetensors or an index)");
    parser.addOption("atol", "A", "absolute tolerance", "0");
    parser.addOption("rtol", "R", "relative tolerance: |a-b| <= atol + rtol*|b|", "0");
    parser.addSwitch("failures_only", "list only the tensors that differ");
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    if (parser.value("test_hf_dir").empty())
        return reportFailure(parser, "--test_hf_dir is required", ExitUsage);
    CompareOptions compare;
    for (const char* name : { "atol", "rtol" }) {
        const auto v = decimalOption(parser, name, 0, HUGE_VAL);
        if (!v)
            return reportFailure(parser, v.error().message, ExitUsage);
        (std::string(name) == "atol" ? compare.atol : compare.rtol) = *v;
    }
    auto setup = prepareMerge(parser, "test");
    if (setup.exitCode >= 0)
        return setup.exitCode;
    compare.threads = setup.threads;
    if (parser.isSet("is_value_model") || parser.isSet("tie_word_embedding"))
        compare.ignore.insert("lm_head.weight"); // as verl's test does
    const bool json = parser.isSet("json");
    auto planned = planSetup(setup);
    if (!planned)
        return reportFailure(parser, planned.error().message);
    TerminalProgress progress("Comparing", TerminalProgress::Unit::Bytes, parser.isSet("quiet") || json);
    auto report = compareWithReference(planned->primaryInfo(setup), planned->primary(), parser.value("test_hf_dir"),
                                       compare, progress);
    progress.finish();
    setup.debug.stage("compare");
    if (!report)
        return reportFailure(parser, report.error().message);
    if (json) {
        auto tensors = nlohmann::json::array();
        for (const auto& t : report->tensors)
            tensors.push_back({ { "name", t.name }, { "equal", t.verdict == TensorComparison::Verdict::Equal },
                                { "detail", t.detail }, { "mismatches", t.mismatches },
                                { "max_abs_diff", t.maxAbsDiff }, { "note", t.note } });
        std::cout << jsonText({ { "reference", report->reference }, { "ok", report->ok() },
                                { "failures", report->failures() }, { "tensors", tensors } })
                  << "\n";
    } else {
        std::cout << report->text(parser.isSet("failures_only"));
    }
    return report->ok() ? ExitOk : ExitProblems;
}

} // namespace tessera::cli
