// SPDX-License-Identifier: GPL-3.0-or-later
// Split benchmark (not a test): makes a large Hugging Face model (a synthetic FSDP2 checkpoint merged once), splits
// it into FSDP2 rank files or a DCP folder in a child process, and prints the time against a plain copy of the
// model's bytes measured in the same run, and the split's peak RSS against the 2 × largest tensor + 64 MiB bound.
//
//   bench_split [--hf DIR] [--work DIR] [--gb 1.2] [--ranks 4] [--format fsdp|dcp] [--rounds 2]

#include "bench_args.h"
#include "bench_timing.h"
#include "formats/scan.h"
#include "io/byte_size.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "split/split_engine.h"
#include "split/split_plan.h"
#include "synthetic_checkpoint.h"

#include <filesystem>
#include <iostream>

using namespace tessera;
using namespace tessera::bench;
namespace fs = std::filesystem;

namespace {

Result<SplitPlan> planBenchSplit(const MergePlan& model, int ranks, SplitFormat format)
{
    SplitOptions options;
    options.format = format;
    options.worldSize = ranks;
    options.moduleOrder = true;
    return planSplit(model, options);
}

} // namespace

int main(int argc, char** argv)
{
    std::string hf, work = fs::temp_directory_path().string() + "/tessera-bench-split", formatName = "fsdp";
    double gb = 1.2;
    int ranks = 4, rounds = 2;
    if (!parseFlags(argc, argv,
                    { { "--hf", &hf }, { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks },
                      { "--format", &formatName }, { "--rounds", &rounds } })) {
        std::cerr << "usage: bench_split [--hf DIR] [--work DIR] [--gb 1.2] [--ranks 4] [--format fsdp|dcp] [--rounds 2]\n";
        return 2;
    }
    auto format = splitFormatFromName(formatName);
    if (!format) {
        std::cerr << format.error().message << "\n";
        return 2;
    }
    fs::create_directories(work);
    if (hf.empty()) {
        hf = work + "/hf";
        if (!fs::exists(hf + "/model.safetensors.index.json") && !fs::exists(hf + "/model.safetensors")) {
            std::cout << "writing a " << gb << " GB Hugging Face model to " << hf << "\n";
            const std::string actor = work + "/actor";
            auto written = writeCheckpoint(actor, gb, 2, 4096, 0, 0);
            auto info = written ? scanCheckpoint(actor) : Result<CheckpointInfo>(written.error());
            auto plan = info ? planMerge(*info, {}) : Result<MergePlan>(info.error());
            auto merged = plan ? mergeCheckpoint(*info, *plan, hf, {}) : Result<MergeOutcome>(plan.error());
            if (!merged) {
                std::cerr << merged.error().message << "\n";
                return 1;
            }
            fs::remove_all(actor);
        }
    }
    auto info = scanCheckpoint(hf);
    auto model = info ? planMerge(*info, {}) : Result<MergePlan>(info.error());
    auto plan = model ? planBenchSplit(*model, ranks, *format) : Result<SplitPlan>(model.error());
    if (!plan) {
        std::cerr << plan.error().message << "\n";
        return 1;
    }
    std::cout << "model: " << model->tensors.size() << " tensors, " << formatBytes(model->totalBytes) << " in "
              << info->files.size() << " files; largest tensor " << formatBytes(model->largestTensorBytes) << "\n"
              << "split: " << plan->layout << "\n";

    double bestCopy = 1e30, bestSplit = 1e30;
    long peakKb = 0;
    std::uint64_t copied = 0;
    for (int round = 0; round < rounds; ++round) {
        const double copyTime = plainCopy(info->files, work + "/copy", copied);
        fs::remove_all(work + "/copy");
        bestCopy = std::min(bestCopy, copyTime);
        fs::remove_all(work + "/out");
        // The split runs in a child so that its peak RSS is its own.
        const ChildRun split = runInChild([&] {
            auto scanned = scanCheckpoint(hf);
            auto m = scanned ? planMerge(*scanned, {}) : Result<MergePlan>(scanned.error());
            auto p = m ? planBenchSplit(*m, ranks, *format) : Result<SplitPlan>(m.error());
            auto outcome = p ? runSplit(*scanned, *m, *p, work + "/out", {}) : Result<SplitOutcome>(p.error());
            if (!outcome)
                std::cerr << outcome.error().message << "\n";
            return outcome ? 0 : 5;
        });
        if (!split.ok) {
            std::cerr << "split failed\n";
            return 1;
        }
        const double splitTime = split.seconds;
        bestSplit = std::min(bestSplit, splitTime);
        peakKb = std::max(peakKb, split.peakKb);
        std::cout << "round " << round + 1 << ": copy " << copyTime << " s, split " << splitTime << " s\n";
        fs::remove_all(work + "/out");
    }
    const std::uint64_t bound = 2 * model->largestTensorBytes + (64u << 20);
    std::cout << "plain copy: " << formatBytes(copied) << " in " << bestCopy << " s = " << copied / bestCopy / 1e9 << " GB/s\n";
    std::cout << "split:      " << formatBytes(plan->totalBytes) << " in " << bestSplit << " s = "
              << static_cast<double>(plan->totalBytes) / bestSplit / 1e9 << " GB/s\n";
    std::cout << "ratio split/copy: " << bestSplit / bestCopy << " (target ≤ 1.5)\n";
    std::cout << "peak RSS of the split: " << formatBytes(static_cast<std::uint64_t>(peakKb) * 1024)
              << " (bound 2 × largest tensor + 64 MiB = " << formatBytes(bound) << ")\n";
    return 0;
}
