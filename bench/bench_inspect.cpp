// SPDX-License-Identifier: GPL-3.0-or-later
// Inspect benchmark (not a test): scanning reads only headers and pickles, never tensor data, so it must take
// well under a second on a 1 GB checkpoint whatever its size. Writes a synthetic verl FSDP2 checkpoint (or
// takes a folder), drops it from the page cache where possible, scans it several times and prints the times.
//
//   bench_inspect [--dir CHECKPOINT] [--work DIR] [--gb 1.0] [--ranks 4] [--hidden 4096] [--rounds 5] [--keep]

#include "bench_args.h"
#include "formats/scan.h"
#include "synthetic_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

using namespace tessera;
namespace fs = std::filesystem;

namespace {
double seconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Asks the kernel to forget the files' cached pages, so the first scan reads from disk as a user's would.
void dropFromCache(const std::vector<std::string>& files)
{
    for (const auto& f : files) {
        const int fd = ::open(f.c_str(), O_RDONLY);
        if (fd >= 0) {
            ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            ::close(fd);
        }
    }
}
} // namespace

int main(int argc, char** argv)
{
    std::string dir, work = fs::temp_directory_path().string() + "/tessera-bench-inspect";
    double gb = 1.0;
    int ranks = 4, rounds = 5;
    std::int64_t hidden = 4096;
    bool keep = false;
    if (!bench::parseFlags(argc, argv,
                           { { "--dir", &dir }, { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks },
                             { "--hidden", &hidden }, { "--rounds", &rounds }, { "--keep", &keep } })) {
        std::cerr << "usage: bench_inspect [--dir CHECKPOINT] [--work DIR] [--gb 1.0] [--ranks 4] [--hidden 4096] "
                     "[--rounds 5] [--keep]\n";
        return 2;
    }
    if (dir.empty()) {
        dir = work + "/checkpoint";
        fs::remove_all(work);
        std::cout << "writing a " << gb << " GB synthetic FSDP2 checkpoint (" << ranks << " ranks, hidden " << hidden
                  << ") to " << dir << "\n";
        auto status = bench::writeCheckpoint(dir, gb, ranks, hidden);
        if (!status) {
            std::cerr << status.error().message << "\n";
            return 1;
        }
    }
    auto first = scanCheckpoint(dir);
    if (!first) {
        std::cerr << first.error().message << "\n";
        return 1;
    }
    std::uint64_t fileBytes = 0;
    for (const auto& f : first->files)
        fileBytes += fs::file_size(f);
    std::printf("checkpoint: %s, %zu tensors, %zu files, %.3f GB on disk\n", first->layout.c_str(),
                first->tensors.size(), first->files.size(), static_cast<double>(fileBytes) / 1e9);
    double best = 1e9, cold = 0;
    for (int r = 0; r < rounds; ++r) {
        if (r == 0)
            dropFromCache(first->files);
        const double start = seconds();
        auto info = scanCheckpoint(dir);
        const double took = seconds() - start;
        if (!info) {
            std::cerr << info.error().message << "\n";
            return 1;
        }
        if (r == 0)
            cold = took;
        best = std::min(best, took);
    }
    std::printf("scan: %.3f s after dropping the page cache, best of %d: %.3f s\n", cold, rounds, best);
    if (!keep && dir == work + "/checkpoint")
        fs::remove_all(work);
    return 0;
}
