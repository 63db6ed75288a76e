// SPDX-License-Identifier: GPL-3.0-or-later
// Drift benchmark (not a test): writes a synthetic verl FSDP2 run saved at several steps (each step the 4-rank bf16
// checkpoint of the other benchmarks, with other values), then runs `drift` over it in a child process, with the
// files cached and from a cold cache (each file's pages dropped with posix_fadvise), and prints GB/s of checkpoint
// bytes, the ratio to reading the same bytes (`cat`) and to bench's plain copy, and the peak RSS against the
// 2 × largest tensor + 64 MiB per thread bound.
//
//   bench_drift [--work DIR] [--gb 1.2] [--ranks 4] [--steps 4] [--threads N] [--rounds 2] [--keep]

#include "bench_args.h"
#include "bench_timing.h"
#include "compare/drift.h"
#include "formats/scan.h"
#include "io/byte_size.h"
#include "parallel.h"
#include "synthetic_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

using namespace tessera;
using namespace tessera::bench;
namespace fs = std::filesystem;

namespace {

/// Drops the pages of every file from the page cache (they are clean: nothing is lost), so the next read is cold.
void dropFromCache(const std::vector<std::string>& files)
{
    for (const auto& f : files) {
        const int fd = ::open(f.c_str(), O_RDONLY);
        if (fd < 0)
            continue;
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
}

/// Reads every file to the end, as `cat FILES > /dev/null` does; returns the seconds taken.
double readAll(const std::vector<std::string>& files)
{
    std::vector<char> buffer(1 << 20);
    const double start = now();
    for (const auto& f : files) {
        const int fd = ::open(f.c_str(), O_RDONLY);
        while (fd >= 0 && ::read(fd, buffer.data(), buffer.size()) > 0) {
        }
        if (fd >= 0)
            ::close(fd);
    }
    return now() - start;
}

} // namespace

int main(int argc, char** argv)
{
    std::string work = fs::temp_directory_path().string() + "/tessera-bench-drift";
    double gb = 1.2;
    int ranks = 4, steps = 4, threads = 0, rounds = 2;
    bool keep = false;
    if (!parseFlags(argc, argv,
                    { { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks }, { "--steps", &steps },
                      { "--threads", &threads }, { "--rounds", &rounds }, { "--keep", &keep } })) {
        std::cerr << "usage: bench_drift [--work DIR] [--gb 1.2] [--ranks 4] [--steps 4] [--threads N] [--rounds 2] "
                     "[--keep]\n";
        return 2;
    }
    const std::string run = work + "/run";
    std::vector<std::string> files;
    std::uint64_t bytes = 0, largest = 0;
    for (int s = 1; s <= steps; ++s) {
        const std::string actor = run + "/global_step_" + std::to_string(10 * s) + "/actor";
        if (!fs::exists(actor + "/model_world_size_" + std::to_string(ranks) + "_rank_0.pt")) {
            std::cout << "writing step " << 10 * s << ": a " << gb << " GB synthetic FSDP2 checkpoint (" << ranks
                      << " ranks) in " << actor << "\n";
            if (auto status = writeCheckpoint(actor, gb, ranks, 4096, 0, 0, DType::BFloat16, static_cast<std::uint64_t>(s));
                !status) {
                std::cerr << status.error().message << "\n";
                return 1;
            }
        }
        auto info = scanCheckpoint(actor);
        if (!info) {
            std::cerr << info.error().message << "\n";
            return 1;
        }
        files.insert(files.end(), info->files.begin(), info->files.end());
        for (const auto& t : info->tensors) {
            bytes += t.nbytes();
            largest = std::max<std::uint64_t>(largest, t.nbytes());
        }
    }
    std::uint64_t fileBytes = 0;
    for (const auto& f : files)
        fileBytes += fs::file_size(f);
    const unsigned used = resolveThreads(threads);
    std::cout << "run: " << steps << " steps, " << formatBytes(fileBytes) << " in " << files.size()
              << " files; largest tensor " << formatBytes(largest) << "; " << used << " threads\n";

    auto driftOnce = [&] {
        return runInChild([&] {
            DriftOptions options;
            options.root = run;
            options.threads = threads;
            auto report = driftRun(options);
            return report && report->damaged.empty() ? 0 : 1;
        });
    };
    double bestWarm = 1e30, bestCold = 1e30, bestCat = 1e30, bestCopy = 1e30;
    long peakKb = 0;
    for (int round = 0; round < rounds; ++round) {
        dropFromCache(files);
        bestCat = std::min(bestCat, readAll(files)); // cold read, which also leaves the files cached
        const ChildRun warm = driftOnce();
        dropFromCache(files);
        const ChildRun cold = driftOnce();
        std::uint64_t copied = 0;
        dropFromCache(files);
        bestCopy = std::min(bestCopy, plainCopy(files, work + "/copy", copied));
        fs::remove_all(work + "/copy");
        if (!warm.ok || !cold.ok) {
            std::cerr << "drift failed\n";
            return 1;
        }
        bestWarm = std::min(bestWarm, warm.seconds);
        bestCold = std::min(bestCold, cold.seconds);
        peakKb = std::max({ peakKb, warm.peakKb, cold.peakKb });
        std::cout << "round " << round + 1 << ": cat (cold) " << bestCat << " s, drift cached " << warm.seconds
                  << " s, drift cold " << cold.seconds << " s\n";
    }
    const double gbs = static_cast<double>(fileBytes) / 1e9;
    const std::uint64_t bound = 2 * largest + used * (64ull << 20);
    std::cout << "drift, files cached: " << gbs / bestWarm << " GB/s of checkpoint bytes (target ≥ 1)\n";
    std::cout << "drift, cold cache:   " << bestCold << " s; cat " << bestCat << " s, plain copy " << bestCopy
              << " s; ratio drift/copy " << bestCold / bestCopy << " (target ≤ 1.3), drift/cat " << bestCold / bestCat
              << "\n";
    std::cout << "peak RSS of drift: " << formatBytes(static_cast<std::uint64_t>(peakKb) * 1024)
              << " (bound 2 × largest tensor + 64 MiB per thread = " << formatBytes(bound) << ")\n";
    if (!keep)
        fs::remove_all(work);
    return 0;
}
