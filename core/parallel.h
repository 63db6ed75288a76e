// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace tessera {

/// Number of worker threads to use when the user asked for `requested` (0 = one per core).
inline unsigned resolveThreads(int requested)
{
    if (requested > 0)
        return static_cast<unsigned>(requested);
    return std::max(1u, std::thread::hardware_concurrency());
}

/// Threads for reading whole-file pickles (one rank's state dict each): an unpickled tree takes tens of times
/// the bytes of its data.pkl while it is interpreted, so on a many-core machine reading every file at once could
/// exhaust memory on checkpoints with tens of thousands of tensors per rank. Header reading is bound by the disk
/// anyway, so a handful of readers is as fast.
inline unsigned resolvePickleReaders(int requested)
{
    if (requested > 0)
        return static_cast<unsigned>(requested);
    return std::min(4u, resolveThreads(0));
}

/// Calls fn(i) for i in [0, count) on up to `threads` threads; items are handed out in order.
/// fn must not throw. Returns when all calls have finished.
inline void parallelFor(std::size_t count, unsigned threads, const std::function<void(std::size_t)>& fn)
{
    threads = static_cast<unsigned>(std::min<std::size_t>(std::max(1u, threads), count));
    if (threads <= 1) {
        for (std::size_t i = 0; i < count; ++i)
            fn(i);
        return;
    }
    std::atomic<std::size_t> next { 0 };
    std::vector<std::thread> workers;
    workers.reserve(threads);
    for (unsigned t = 0; t < threads; ++t)
        workers.emplace_back([&] {
            for (std::size_t i = next++; i < count; i = next++)
                fn(i);
        });
    for (auto& w : workers)
        w.join();
}

} // namespace tessera
