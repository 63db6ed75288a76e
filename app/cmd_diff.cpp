// SPDX-License-Identifier: GPL-3.0-or-later
// tessera diff A B [--atol A --rtol R] [--json] [--failures_only]: two checkpoints of any layout, tensor by tensor.

#include "cli_args.h"
#include "commands.h"
#include "terminal_progress.h"
#include "terminal_text.h"

#include "formats/safetensors_reader.h"
#include "formats/scan.h"
#include "compare/diff_export.h"
#include "compare/tensor_diff.h"
#include "io/printable.h"

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
    ArgParser parser("diff", "A B [--atol A --rtol R] [--json] [--failures_only]  |  A --lora_update",
                     "Compare two checkpoints tensor by tensor. A and B may be any layout Tessera reads (verl FSDP,\n"
                     "DCP, Megatron, Hugging Face safetensors folders or files); Megatron names are mapped to Hugging\n"
                     "Face names first. Prints one line per tensor: status, max/mean |a-b|, max relative error,\n"
                     "cosine similarity, differing elements, NaN/Inf counts of A and B and whether the bytes are\n"
                     "equal. A tensor passes when |a-b| <= atol + rtol*|b| for every element (NaN only matches NaN;\n"
                     "integer tensors must be equal). Exits with 0 when every tensor passes and none is missing,\n"
                     "1 otherwise. A LoRA checkpoint is compared as its fused model; with --lora_update and no B,\n"
                     "its base model is compared with its fused model, showing what the adapter changed.");
    parser.addPositional("A", "the checkpoint to check (folder or file)");
    parser.addPositional("B", "the reference (folder or file); not with --lora_update", true);
    parser.addSwitch("lora_update", "A is a LoRA checkpoint: compare its base weights (as B) with its fused model (as "
                                    "A), so every fused weight shows its update");
    parser.addOption("atol", "A", "absolute tolerance", "0");
    parser.addOption("rtol", "R", "relative tolerance, to B: |a-b| <= atol + rtol*|b|", "0");
    parser.addSwitch("json", "print one JSON object on stdout (non-finite numbers as \"inf\", \"-inf\", \"nan\")");
    parser.addSwitch("failures_only", "list only the tensors that do not pass");
    parser.addSwitch("quiet", "no progress bar");
    parser.addOption("hf_model_path", "DIR", "config.json folder for A (Megatron name mapping), if not found");
    parser.addOption("hf_model_path_b", "DIR", "config.json folder for B, if not found");
    parser.addOption("threads", "N", "tensors compared in parallel, 1 to " + std::to_string(kMaxThreads),
                     "number of cores");
    if (const auto exitCode = parseCommandLine(parser, args))
        return *exitCode;
    DiffOptions options;
    for (const char* name : { "atol", "rtol" }) {
        const auto v = decimalOption(parser, name, 0, HUGE_VAL);
        if (!v)
            return reportFailure(parser, v.error().message, ExitUsage);
        (std::string(name) == "atol" ? options.atol : options.rtol) = *v;
    }
    const auto threads = threadsOption(parser);
    if (!threads)
        return reportFailure(parser, threads.error().message, ExitUsage);
    options.threads = *threads;
    const bool json = parser.isSet("json");
    const bool quiet = parser.isSet("quiet") || json;
    auto fail = [&](const std::string& message) { return reportFailure(parser, message); };

    std::vector<std::string> warnings;
    auto load = [&](const std::string& path, const std::string& configDir, const char* side) -> Result<CheckpointInfo> {
        ScanOptions scan;
        scan.hfModelPath = configDir;
        scan.threads = static_cast<int>(options.threads);
        TerminalProgress progress(std::string("Scanning ") + side, TerminalProgress::Unit::Items, quiet);
        auto info = scanCheckpoint(path, scan, progress);
        progress.finish();
        if (!info)
            return info.error().withContext(side);
        // Problems of whole files are warnings; those of one tensor are also in its row, so a few are listed and
        // the rest counted (a truncated rank flags every tensor it held).
        constexpr std::size_t kTensorProblemsListed = 3;
        std::size_t tensorProblems = 0;
        for (const auto& p : info->problems) {
            if (!p.tensor.empty() && ++tensorProblems > kTensorProblemsListed)
                continue;
            warnings.push_back(std::string(side) + ": " + p.text());
        }
        if (tensorProblems > kTensorProblemsListed)
            warnings.push_back(std::string(side) + ": … and " + std::to_string(tensorProblems - kTensorProblemsListed)
                               + " more tensors with problems (each in its row below)");
        return withHfNames(*info, configDir, &warnings);
    };
    const bool loraUpdate = parser.isSet("lora_update");
    if (loraUpdate == !parser.positional("B").empty())
        return reportFailure(parser, loraUpdate ? "--lora_update compares A with itself; give no B"
                                                : "B is required (or --lora_update for a LoRA checkpoint)",
                             ExitUsage);
    CheckpointInfo a, b;
    if (loraUpdate) {
        // The base model is the reference: each fused weight's difference is its update (B·A)·scale.
        auto scanned = load(parser.positional("A"), parser.value("hf_model_path"), "A");
        if (!scanned)
            return fail(scanned.error().message);
        if (scanned->loraDeltas.empty())
            return fail(parser.positional("A") + " has no LoRA update to show (not a LoRA checkpoint with its base "
                                                 "weights)");
        a = std::move(*scanned);
        b = a.withoutLoraUpdates();
    } else {
        auto scannedA = load(parser.positional("A"), parser.value("hf_model_path"), "A");
        if (!scannedA)
            return fail(scannedA.error().message);
        auto scannedB = load(parser.positional("B"), parser.value("hf_model_path_b"), "B");
        if (!scannedB)
            return fail(scannedB.error().message);
        a = std::move(*scannedA);
        b = std::move(*scannedB);
    }
    if (!quiet)
        for (const auto& w : warnings)
            printMessage("diff", "warning", w);
    // Said before any tensor: two different models explain every missing tensor and shape mismatch below.
    if (const std::string models = describeConfigDifferences(compareModelConfigs(a.hfConfigDir, b.hfConfigDir));
        !models.empty())
        printMessage("diff", "", models);

    TerminalProgress progress("Comparing", TerminalProgress::Unit::Items, quiet);
    auto report = diffCheckpoints(a, b, options, progress);
    progress.finish();
    if (!report)
        return fail(report.error().message);

    if (json) {
        std::cout << jsonText(diffReportToJson(*report, a.layout, b.layout, warnings, parser.isSet("failures_only")))
                  << "\n";
    } else {
        std::cout << table(*report, parser.isSet("failures_only"));
        std::cout << (report->ok() ? "OK: " : "DIFFERENT: ") << printableText(report->summary()) << " (atol "
                  << options.atol
                  << ", rtol " << options.rtol << ")\n";
    }
    return report->ok() ? ExitOk : ExitProblems;
}

} // namespace tessera::cli
