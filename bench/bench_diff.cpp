// SPDX-License-Identifier: GPL-3.0-or-later
// Diff benchmark (not a test): writes a synthetic verl FSDP2 checkpoint (or takes a folder), merges it once into a
// Hugging Face model, then times `tessera diff` of the checkpoint against its merge and `tessera test` of the same
// pair, each in a child process with the files cached, and prints GB/s of checkpoint bytes, CPU time and the
// diff's peak RSS against the 2 × largest tensor + 64 MiB per thread bound.
//
// With --shard_dim 1 the matrices are sharded by columns, so the diff assembles each of the checkpoint's tensors in
// memory rather than reading it where it lies.
//
//   bench_diff [--dir CHECKPOINT] [--work DIR] [--gb 1.2] [--ranks 4] [--shard_dim 0|1] [--threads N] [--rounds 3]
//              [--keep]

#include "bench_args.h"
#include "bench_timing.h"
#include "formats/scan.h"
#include "io/byte_size.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "ops/prepare_diff.h"
#include "ops/prepare_test.h"
#include "parallel.h"
#include "synthetic_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

using namespace tessera;
using namespace tessera::bench;
namespace fs = std::filesystem;

namespace {

/// Reads every file under `dir` once, so the timed runs find them in the page cache.
void warmCache(const std::string& dir)
{
    std::vector<char> buf(16 << 20);
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        if (!entry.is_regular_file())
            continue;
        const int fd = ::open(entry.path().c_str(), O_RDONLY);
        while (fd >= 0 && ::read(fd, buf.data(), buf.size()) > 0) { }
        if (fd >= 0)
            ::close(fd);
    }
}

/// `tessera diff A B` as the command runs it: prepare (both scans), then the comparison; 0 when every tensor is
/// identical, as it must be for a checkpoint and its own merge.
int diffInChild(const std::string& a, const std::string& b, int threads)
{
    std::vector<std::string> args { a, b, "--quiet" };
    if (threads > 0)
        args.insert(args.end(), { "--threads", std::to_string(threads) });
    auto request = DiffRequest::fromArgs(args);
    if (!request)
        return 3;
    const double t0 = now();
    const PreparedDiff prepared = prepareDiff(*request);
    if (prepared.refusal) {
        std::cerr << prepared.refusal->error.message << "\n";
        return 4;
    }
    const double t1 = now();
    auto report = runPreparedDiff(prepared);
    if (!report) {
        std::cerr << report.error().message << "\n";
        return 5;
    }
    std::printf("  (diff: scans %.2f s, comparison %.2f s; %s)\n", t1 - t0, now() - t1, report->summary().c_str());
    std::fflush(stdout); // the child ends with _exit(), which flushes nothing
    return report->count(DiffStatus::Identical) == report->tensors.size() ? 0 : 6;
}

/// `tessera test --local_dir A --test_hf_dir B`: the merge in memory against the reference.
int testInChild(const std::string& a, const std::string& b, int threads)
{
    std::vector<std::string> args { "--local_dir", a, "--test_hf_dir", b };
    if (threads > 0)
        args.insert(args.end(), { "--threads", std::to_string(threads) });
    auto request = TestRequest::fromArgs(args);
    if (!request)
        return 3;
    const PreparedTest prepared = prepareTest(*request);
    if (prepared.refusal) {
        std::cerr << prepared.refusal->error.message << "\n";
        return 4;
    }
    auto report = runPreparedTest(prepared);
    if (!report) {
        std::cerr << report.error().message << "\n";
        return 5;
    }
    return report->ok() ? 0 : 6;
}

} // namespace

int main(int argc, char** argv)
{
    std::string dir, work = fs::temp_directory_path().string() + "/tessera-bench-diff";
    double gb = 1.2;
    int ranks = 4, threads = 0, rounds = 3, shardDim = 0;
    bool keep = false;
    if (!parseFlags(argc, argv,
                    { { "--dir", &dir }, { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks },
                      { "--shard_dim", &shardDim }, { "--threads", &threads }, { "--rounds", &rounds },
                      { "--keep", &keep } })) {
        std::cerr << "usage: bench_diff [--dir CHECKPOINT] [--work DIR] [--gb 1.2] [--ranks 4] [--shard_dim 0|1] "
                     "[--threads N] [--rounds 3] [--keep]\n";
        return 2;
    }
    fs::create_directories(work);
    if (dir.empty()) {
        dir = work + "/actor";
        if (!fs::exists(dir + "/model_world_size_" + std::to_string(ranks) + "_rank_0.pt")) {
            std::cout << "writing a " << gb << " GB synthetic FSDP2 checkpoint (" << ranks << " ranks) to " << dir << "\n";
            fs::remove_all(work + "/merged");
            if (auto status = writeCheckpoint(dir, gb, ranks, 4096, shardDim); !status) {
                std::cerr << status.error().message << "\n";
                return 1;
            }
        }
    }
    auto info = scanCheckpoint(dir);
    if (!info) {
        std::cerr << info.error().message << "\n";
        return 1;
    }
    auto plan = planMerge(*info, {});
    if (!plan) {
        std::cerr << plan.error().message << "\n";
        return 1;
    }
    const std::string merged = work + "/merged";
    if (!fs::exists(merged)) {
        std::cout << "merging it into " << merged << "\n";
        auto outcome = mergeCheckpoints({ { &*info, &*plan, "" } }, merged, MergeRunOptions {});
        if (!outcome) {
            std::cerr << outcome.error().message << "\n";
            return 1;
        }
    }
    const unsigned workers = resolveThreads(threads);
    std::cout << "checkpoint: " << info->tensors.size() << " tensors, " << formatBytes(plan->totalBytes) << " in "
              << info->files.size() << " files; largest tensor " << formatBytes(plan->largestTensorBytes) << "; "
              << workers << " threads\n";
    warmCache(dir);
    warmCache(merged);

    ChildRun bestDiff { false, 1e30, 0, 0 }, bestTest { false, 1e30, 0, 0 };
    long peakKb = 0;
    for (int round = 0; round < rounds; ++round) {
        const ChildRun diff = runInChild([&] { return diffInChild(dir, merged, threads); });
        const ChildRun test = runInChild([&] { return testInChild(dir, merged, threads); });
        if (!diff.ok || !test.ok) {
            std::cerr << (diff.ok ? "test" : "diff") << " failed\n";
            return 1;
        }
        std::printf("round %d: diff %.2f s (CPU %.2f s, peak RSS %s), test %.2f s (CPU %.2f s)\n", round + 1,
                    diff.seconds, diff.cpuSeconds, formatBytes(static_cast<std::uint64_t>(diff.peakKb) * 1024).c_str(),
                    test.seconds, test.cpuSeconds);
        std::fflush(stdout);
        if (diff.seconds < bestDiff.seconds)
            bestDiff = diff;
        if (test.seconds < bestTest.seconds)
            bestTest = test;
        peakKb = std::max(peakKb, diff.peakKb);
    }
    const double bytes = static_cast<double>(plan->totalBytes);
    const std::uint64_t bound = 2 * plan->largestTensorBytes + workers * (64ull << 20);
    std::printf("diff: %s in %.2f s = %.2f GB/s of checkpoint bytes (CPU %.2f s; target ≥ 1 GB/s)\n",
                formatBytes(plan->totalBytes).c_str(), bestDiff.seconds, bytes / bestDiff.seconds / 1e9,
                bestDiff.cpuSeconds);
    std::printf("test: %.2f s = %.2f GB/s (CPU %.2f s)\n", bestTest.seconds, bytes / bestTest.seconds / 1e9,
                bestTest.cpuSeconds);
    std::printf("peak RSS of the diff: %s (bound 2 × largest tensor + 64 MiB × %u threads = %s)\n",
                formatBytes(static_cast<std::uint64_t>(peakKb) * 1024).c_str(), workers, formatBytes(bound).c_str());
    if (!keep)
        fs::remove_all(merged);
    return 0;
}
