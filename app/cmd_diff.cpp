// SPDX-License-Identifier: GPL-3.0-or-later
// tessera diff A B [--atol A --rtol R] [--json] [--failures_only]: two checkpoints of any layout, tensor by tensor.
// argv → DiffRequest → prepareDiff() → runPreparedDiff() → the table, printed.

#include "cli_args.h"
#include "commands.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "compare/diff_export.h"
#include "compare/tensor_diff.h"
#include "io/printable.h"
#include "ops/prepare_diff.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>

namespace tessera::cli {

namespace {

std::string cell(double v, bool compared)
{
    if (!compared)
        return "-";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, v == 0 ? "%.0f" : "%.4g", v);
    return buffer;
}

std::string countsCell(std::uint64_t a, std::uint64_t b, bool compared)
{
    return compared ? std::to_string(a) + "/" + std::to_string(b) : "-";
}

std::string table(const DiffReport& report, bool failuresOnly)
{
    std::string out;
    char line[512];
    std::snprintf(line, sizeof line, "%-16s %11s %11s %11s %9s %10s %9s %9s %4s  %s\n", "STATUS", "MAX|A-B|",
                  "MEAN|A-B|", "MAX REL", "COSINE", "DIFFERING", "NAN A/B", "INF A/B", "BITS", "TENSOR");
    out += line;
    for (const auto& t : report.tensors) {
        if (failuresOnly && diffStatusOk(t.status))
            continue;
        char cosine[32] = "-";
        const bool numeric = t.compared && t.numeric;
        if (numeric)
            std::snprintf(cosine, sizeof cosine, "%.6f", t.cosine);
        std::snprintf(line, sizeof line, "%-16s %11s %11s %11s %9s %10s %9s %9s %4s  ", diffStatusName(t.status),
                      // A NaN opposite a number is no distance: "nan", as in the workbench, not the inf it ranks as.
                      (numeric && t.nanOpposite > 0 && std::isinf(t.maxAbsDiff) ? std::string("nan")
                                                                                 : cell(t.maxAbsDiff, numeric))
                          .c_str(),
                      cell(t.meanAbsDiff, numeric).c_str(),
                      cell(t.maxRelDiff, numeric).c_str(), cosine,
                      t.compared ? std::to_string(t.differing).c_str() : "-",
                      countsCell(t.a.nan, t.b.nan, numeric).c_str(), countsCell(t.a.inf, t.b.inf, numeric).c_str(),
                      t.compared ? (t.bitEqual ? "=" : "!=") : "-");
        out += line + printableText(t.name) + "\n";
        if (!t.detail.empty() && t.status != DiffStatus::Identical)
            out += std::string(17, ' ') + printableText(t.detail) + "\n";
    }
    return out;
}

} // namespace

int runDiff(const std::vector<std::string>& args)
{
    ArgParser parser = DiffRequest::parser();
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    const DiffRequest request = DiffRequest::fromParser(parser);
    if (const Status valid = request.validate(); !valid)
        return reportFailure(parser, valid.error().message, ExitUsage);
    TerminalProgress scanning("Scanning", TerminalProgress::Unit::Items, request.silent());
    PrepareContext context;
    context.progress = &scanning;
    const PreparedDiff prepared = prepareDiff(request, context);
    scanning.finish();
    if (prepared.refusal)
        return reportFailure(parser, prepared.refusal->error.message,
                             prepared.refusal->usage ? ExitUsage : ExitProblems);
    if (!request.silent())
        for (const auto& w : prepared.warnings)
            printMessage("diff", "warning", w);
    // Said before any tensor: two different models explain every missing tensor and shape mismatch below.
    if (!prepared.models.empty())
        printMessage("diff", "", prepared.models);

    TerminalProgress progress("Comparing", TerminalProgress::Unit::Items, request.silent());
    auto report = runPreparedDiff(prepared, progress);
    progress.finish();
    if (!report)
        return reportFailure(parser, report.error().message);
    if (request.json) {
        std::cout << jsonText(diffReportToJson(*report, prepared.a->layout, prepared.b->layout, prepared.warnings,
                                               request.failuresOnly))
                  << "\n";
    } else {
        std::cout << table(*report, request.failuresOnly);
        std::cout << (report->ok() ? "OK: " : "DIFFERENT: ") << printableText(report->summary()) << " (atol "
                  << prepared.options.atol << ", rtol " << prepared.options.rtol << ")\n";
    }
    return report->ok() ? ExitOk : ExitProblems;
}

} // namespace tessera::cli
