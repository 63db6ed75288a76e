// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF export benchmark (not a test): writes a synthetic verl FSDP2 checkpoint of a Llama-like model (bf16) with
// a config and a small byte-level BPE tokenizer, then exports it as GGUF in a child process and prints the time
// against a plain copy of the checkpoint's bytes measured in the same run, and the export's peak RSS against the
// 2 × largest tensor + 64 MiB bound.
//
//   bench_gguf [--work DIR] [--gb 1.0] [--ranks 4] [--source bf16|f32] [--outtype TYPE] [--rounds 2]
//              [--threads 0]
// --source f32 writes the checkpoint in float32 (about --gb GB still, half the layers), as fp32 runs save it.

#include "bench_args.h"
#include "bench_timing.h"
#include "formats/scan.h"
#include "io/byte_size.h"
#include "merge/gguf_plan.h"
#include "parallel.h"
#include "synthetic_checkpoint.h"

#include <filesystem>
#include <iostream>

using namespace tessera;
using namespace tessera::bench;
namespace fs = std::filesystem;

int main(int argc, char** argv)
{
    std::string work = fs::temp_directory_path().string() + "/tessera-bench-gguf", outtypeName = "f16",
                sourceName = "bf16";
    double gb = 1.0;
    int ranks = 4, rounds = 2, threads = 0;
    if (!parseFlags(argc, argv,
                    { { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks }, { "--outtype", &outtypeName },
                      { "--source", &sourceName }, { "--rounds", &rounds }, { "--threads", &threads } })
        || (sourceName != "bf16" && sourceName != "f32")) {
        std::cerr << "usage: bench_gguf [--work DIR] [--gb 1.0] [--ranks 4] [--source bf16|f32] "
                     "[--outtype " << ggufOutTypeChoices("|", "|") << "] [--rounds 2] [--threads 0]\n";
        return 2;
    }
    const bool f32Source = sourceName == "f32";
    const double modelGb = f32Source ? gb / 2 : gb; // the model's size in bf16
    const auto outtype = ggufOutTypeFromName(outtypeName);
    if (!outtype) {
        std::cerr << "--outtype must be " << ggufOutTypeChoices() << "\n";
        return 2;
    }
    const std::string actor = work + "/actor-" + sourceName;
    if (!fs::exists(actor + "/model_world_size_" + std::to_string(ranks) + "_rank_0.pt")) {
        fs::remove_all(actor);
        std::cout << "writing a " << gb << " GB " << sourceName << " verl FSDP2 checkpoint (" << ranks << " ranks) to "
                  << actor << "\n";
        if (auto written = writeCheckpoint(actor, modelGb, ranks, 4096, 0, 0, f32Source ? DType::Float32 : DType::BFloat16);
            !written) {
            std::cerr << written.error().message << "\n";
            return 1;
        }
    }
    writeLlamaConfig(actor + "/huggingface", modelGb, 4096);

    GgufOptions options;
    options.outType = *outtype;
    options.threads = resolveThreads(threads);
    auto info = scanCheckpoint(actor);
    auto plan = info ? planGgufMerge(*info, options) : Result<GgufPlan>(info.error());
    if (!plan) {
        std::cerr << plan.error().message << "\n";
        return 1;
    }
    std::uint64_t largest = 0;
    for (const auto& t : info->tensors)
        largest = std::max(largest, t.nbytes());
    std::cout << "checkpoint: " << info->tensors.size() << " tensors, " << formatBytes(info->totalBytes()) << " in "
              << info->files.size() << " files; largest tensor " << formatBytes(largest) << "\n"
              << "export: " << plan->fileName << ", " << formatBytes(plan->fileSize) << "\n";

    double bestCopy = 1e30, bestExport = 1e30;
    long peakKb = 0;
    std::uint64_t copied = 0;
    for (int round = 0; round < rounds; ++round) {
        const double copyTime = plainCopy(info->files, work + "/copy", copied);
        fs::remove_all(work + "/copy");
        bestCopy = std::min(bestCopy, copyTime);
        fs::remove_all(work + "/out");
        // The export runs in a child so that its peak RSS is its own.
        const ChildRun run = runInChild([&] {
            auto scanned = scanCheckpoint(actor);
            auto p = scanned ? planGgufMerge(*scanned, options) : Result<GgufPlan>(scanned.error());
            MergeRunOptions runOptions;
            runOptions.threads = static_cast<unsigned>(threads);
            auto outcome = p ? writeGgufFile(*p, work + "/out", runOptions) : Result<MergeOutcome>(p.error());
            if (!outcome)
                std::cerr << outcome.error().message << "\n";
            return outcome ? 0 : 5;
        });
        if (!run.ok) {
            std::cerr << "export failed\n";
            return 1;
        }
        bestExport = std::min(bestExport, run.seconds);
        peakKb = std::max(peakKb, run.peakKb);
        std::cout << "round " << round + 1 << ": copy " << copyTime << " s, export " << run.seconds << " s\n";
        fs::remove_all(work + "/out");
    }
    const std::uint64_t bound = 2 * largest + (64u << 20);
    std::cout << "plain copy: " << formatBytes(copied) << " in " << bestCopy << " s = " << copied / bestCopy / 1e9
              << " GB/s\n";
    std::cout << "export:     " << formatBytes(plan->fileSize) << " written in " << bestExport << " s\n";
    std::cout << "ratio export/copy: " << bestExport / bestCopy << " (target ≤ 1.5)\n";
    // An export that writes more bytes than it reads (bf16 → f32) is also put against a copy of as many bytes.
    if (plan->fileSize > copied)
        std::cout << "ratio export/copy of as many bytes as written: "
                  << bestExport / (bestCopy * static_cast<double>(plan->fileSize) / static_cast<double>(copied)) << "\n";
    std::cout << "peak RSS of the export: " << formatBytes(static_cast<std::uint64_t>(peakKb) * 1024)
              << " (bound 2 × largest tensor + 64 MiB = " << formatBytes(bound) << ")\n";
    return 0;
}
