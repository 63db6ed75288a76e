// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What the benchmark programs measure against: wall time, and a plain copy of the same bytes.

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tessera::bench {

inline double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// A plain copy of every data file of the checkpoint: what `cp` does (copy_file_range, then fdatasync).
inline double plainCopy(const std::vector<std::string>& files, const std::string& outDir, std::uint64_t& bytes)
{
    std::filesystem::remove_all(outDir);
    std::filesystem::create_directories(outDir);
    const double start = now();
    bytes = 0;
    for (const auto& f : files) {
        const int in = ::open(f.c_str(), O_RDONLY);
        const int out = ::open((outDir + "/" + std::filesystem::path(f).filename().string()).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const auto size = std::filesystem::file_size(f);
        std::uint64_t done = 0;
        while (done < size) {
            const ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, size - done, 0);
            if (n <= 0) {
                std::vector<char> buf(16 << 20);
                ssize_t k;
                while ((k = ::read(in, buf.data(), buf.size())) > 0)
                    if (::write(out, buf.data(), static_cast<size_t>(k)) != k)
                        break;
                done = size;
                break;
            }
            done += static_cast<std::uint64_t>(n);
        }
        bytes += size;
        ::fdatasync(out);
        ::close(in);
        ::close(out);
    }
    return now() - start;
}

/// What a step measured in a child process did.
struct ChildRun {
    bool ok = false;
    double seconds = 0;
    double cpuSeconds = 0; ///< user + system time of the child
    long peakKb = 0; ///< the child's own peak RSS
};

/// Runs `work` in a forked child (its return value is the exit code, 0 for success), so that the peak RSS
/// measured is the work's own, not the generator's or the copy's.
inline ChildRun runInChild(const std::function<int()>& work)
{
    std::fflush(nullptr); // or the child would print again what the parent has not flushed yet
    const double start = now();
    const pid_t child = ::fork();
    if (child == 0)
        ::_exit(work());
    int status = 0;
    struct rusage usage {};
    ::wait4(child, &status, 0, &usage);
    const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
    return { WIFEXITED(status) && WEXITSTATUS(status) == 0, now() - start, cpu, usage.ru_maxrss };
}

} // namespace tessera::bench
