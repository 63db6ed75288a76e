// SPDX-License-Identifier: GPL-3.0-or-later
// Merge benchmark (not a test): writes a large synthetic verl FSDP2 checkpoint with the project's own torch.save
// writer (or takes a folder), merges it in a child process, and prints GB/s, the ratio to a plain copy of the
// same bytes measured in the same run, and the merge's peak RSS against the 2 × largest tensor + 64 MiB bound.
//
// With --lora R the checkpoint is a LoRA run of rank R on all seven projections, merged into the fused model and
// the adapter (both), so the bound covers fusing.
//
//   bench_merge [--dir CHECKPOINT] [--work DIR] [--gb 1.2] [--ranks 4] [--shard_dim 0|1] [--lora R] [--threads N]
//               [--rounds 2] [--keep]

#include "bench_args.h"
#include "bench_timing.h"
#include "io/byte_size.h"
#include "mapping/lora.h"
#include "merge/lora_plan.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "formats/scan.h"
#include "synthetic_checkpoint.h"
#include "pickle/torch_save_writer.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

using namespace tessera;
using namespace tessera::bench;
namespace fs = std::filesystem;

namespace {

/// The merge of `info` as `tessera merge` does it: one plan, or a LoRA checkpoint's fused model and adapter.
struct BenchMerge {
    std::optional<LoraCheckpoint> lora;
    std::optional<MergePlan> plan;
    std::optional<LoraMergePlans> loraPlans;
    std::vector<MergeOutput> outputs(const CheckpointInfo& info) const
    {
        return loraPlans ? loraPlans->outputs(*lora) : std::vector<MergeOutput> { { &info, &*plan, "" } };
    }
    const MergePlan& primary() const { return plan ? *plan : loraPlans->primary(); }
};

Result<BenchMerge> planBench(const CheckpointInfo& info)
{
    BenchMerge m;
    if (hasLoraTensors(info)) {
        auto lora = readLoraCheckpoint(info, {});
        TESSERA_TRY(lora);
        m.lora = std::move(*lora);
        auto plans = planLoraMerge(*m.lora, {}, LoraOutput::Both);
        TESSERA_TRY(plans);
        m.loraPlans = std::move(*plans);
    } else {
        auto plan = planMerge(info, {});
        TESSERA_TRY(plan);
        m.plan = std::move(*plan);
    }
    return m;
}

} // namespace

int main(int argc, char** argv)
{
    std::string dir, work = fs::temp_directory_path().string() + "/tessera-bench";
    double gb = 1.2;
    int ranks = 4, threads = 0, rounds = 2, shardDim = 0, loraRank = 0;
    bool keep = false;
    if (!parseFlags(argc, argv,
                    { { "--dir", &dir }, { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks },
                      { "--shard_dim", &shardDim }, { "--lora", &loraRank }, { "--threads", &threads },
                      { "--rounds", &rounds },
                      { "--keep", &keep } })) {
        std::cerr << "usage: bench_merge [--dir CHECKPOINT] [--work DIR] [--gb 1.2] [--ranks 4] [--shard_dim 0|1] [--lora R] "
                     "[--threads N] [--rounds 2] [--keep]\n";
        return 2;
    }
    fs::create_directories(work);
    if (dir.empty()) {
        dir = work + "/actor";
        if (!fs::exists(dir + "/model_world_size_" + std::to_string(ranks) + "_rank_0.pt")) {
            std::cout << "writing a " << gb << " GB synthetic FSDP2 checkpoint (" << ranks << " ranks"
                      << (loraRank ? ", LoRA rank " + std::to_string(loraRank) : std::string()) << ") to " << dir << "\n";
            const double t0 = now();
            auto status = writeCheckpoint(dir, gb, ranks, 4096, shardDim, loraRank);
            if (!status) {
                std::cerr << status.error().message << "\n";
                return 1;
            }
            std::cout << "  written in " << now() - t0 << " s\n";
        }
    }
    auto info = scanCheckpoint(dir);
    if (!info) {
        std::cerr << info.error().message << "\n";
        return 1;
    }
    auto merge = planBench(*info);
    if (!merge) {
        std::cerr << merge.error().message << "\n";
        return 1;
    }
    const MergePlan* plan = &merge->primary();
    std::cout << "checkpoint: " << info->tensors.size() << " tensors, " << formatBytes(plan->totalBytes) << " in "
              << info->files.size() << " files; largest tensor " << formatBytes(plan->largestTensorBytes) << "\n";

    double bestCopy = 1e30, bestMerge = 1e30;
    long peakKb = 0;
    std::uint64_t copied = 0;
    for (int round = 0; round < rounds; ++round) {
        const double copyTime = plainCopy(info->files, work + "/copy", copied);
        fs::remove_all(work + "/copy");
        bestCopy = std::min(bestCopy, copyTime);
        fs::remove_all(work + "/merged");
        // The merge runs in a child so that its peak RSS is its own, not the generator's or the copy's.
        const ChildRun merged = runInChild([&] {
            auto scanned = scanCheckpoint(dir);
            if (!scanned)
                return 3;
            auto p = planBench(*scanned);
            if (!p)
                return 4;
            MergeRunOptions run;
            run.threads = static_cast<unsigned>(threads);
            auto outcome = mergeCheckpoints(p->outputs(*scanned), work + "/merged", run);
            if (!outcome)
                std::cerr << outcome.error().message << "\n";
            return outcome ? 0 : 5;
        });
        if (!merged.ok) {
            std::cerr << "merge failed\n";
            return 1;
        }
        const double mergeTime = merged.seconds;
        bestMerge = std::min(bestMerge, mergeTime);
        peakKb = std::max(peakKb, merged.peakKb);
        std::cout << "round " << round + 1 << ": copy " << copyTime << " s, merge " << mergeTime << " s\n";
        if (round + 1 < rounds || !keep)
            fs::remove_all(work + "/merged");
    }
    const double bytes = static_cast<double>(plan->totalBytes);
    const std::uint64_t bound = 2 * plan->largestTensorBytes + (64u << 20);
    std::cout << "plain copy: " << formatBytes(copied) << " in " << bestCopy << " s = " << copied / bestCopy / 1e9 << " GB/s\n";
    std::cout << "merge:      " << formatBytes(plan->totalBytes) << " in " << bestMerge << " s = " << bytes / bestMerge / 1e9
              << " GB/s\n";
    std::cout << "ratio merge/copy: " << bestMerge / bestCopy << " (target ≤ 1.3)\n";
    std::cout << "peak RSS of the merge: " << formatBytes(static_cast<std::uint64_t>(peakKb) * 1024) << " (bound 2 × largest tensor + 64 MiB = "
              << formatBytes(bound) << ")\n";
    return 0;
}
