// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

/// How a long core operation reports progress and learns it should stop.
/// The CLI prints it, the workbench maps it to a QPromise, tests use a stub.
/// Implementations must be thread-safe: the engine reports from worker threads.
class Progress {
public:
    virtual ~Progress() = default;
    /// `done` of `total` units (bytes or items, as the operation documents); `text` names the current item.
    virtual void report(std::uint64_t done, std::uint64_t total, const std::string& text)
    {
        (void)done;
        (void)total;
        (void)text;
    }
    /// Checked between units of work; once true the operation stops and returns canceledError().
    virtual bool isCanceled() const { return false; }
};

/// A Progress that reports nothing and never cancels.
inline Progress& silentProgress()
{
    static Progress progress;
    return progress;
}

} // namespace tessera
