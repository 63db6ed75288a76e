// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge_gguf.h"

#include "terminal_text.h"

#include "io/byte_size.h"
#include "io/printable.h"

#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>

namespace tessera::cli {

int printGgufDryRun(const ArgParser& parser, const GgufPlan& plan)
{
    if (parser.isSet("json"))
        std::cout << jsonText(ggufPlanToJson(plan)) << "\n";
    else
        std::cout << ggufPlanSummary(plan, parser.isSet("tensors"));
    return ExitOk;
}

void printGgufExported(const MergeRequest& request, const GgufPlan& plan, const MergeOutcome& outcome)
{
    if (request.json) {
        std::cout << jsonText({ { "output_dir", outcome.outputDir }, { "files", outcome.files },
                                { "format", "gguf" }, { "architecture", plan.architecture },
                                { "outtype", ggufOutTypeName(plan.outType) }, { "total_size", outcome.bytesWritten },
                                { "seconds", outcome.seconds }, { "tensors", plan.tensors.size() },
                                { "dropped", plan.dropped }, { "warnings", outcome.warnings },
                                { "notes", outcome.notes } })
                  << "\n";
    } else if (!request.quiet) {
        std::cout << "Exported " << plan.tensors.size() << " tensors as GGUF (" << plan.architecture << ", "
                  << ggufOutTypeName(plan.outType) << ", " << formatBytes(outcome.bytesWritten) << ") into "
                  << printableText(outcome.outputDir) << " in " << std::fixed
                  << std::setprecision(outcome.seconds < 10 ? 2 : 1) << outcome.seconds << " s\n";
        for (const auto& file : outcome.files)
            std::cout << "  " << printableText(file) << "\n";
    }
}

} // namespace tessera::cli
