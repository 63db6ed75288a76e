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

/// Threads that workers lend each other: a worker about to split its item over several threads takes what is free,
/// and gives it back when done. Workers that all split at once then run at most twice the threads asked for, while
/// one large item left at the end still gets every core.
class SpareThreads {
public:
    explicit SpareThreads(unsigned count) : m_free(count) { }
    /// Up to `wanted` threads, as many as are free now (maybe none).
    unsigned take(unsigned wanted)
    {
        unsigned free = m_free.load();
        unsigned got = 0;
        do
            got = std::min(free, wanted);
        while (!m_free.compare_exchange_weak(free, free - got));
        return got;
    }
    void give(unsigned count) { m_free += count; }

private:
    std::atomic<unsigned> m_free;
};

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
