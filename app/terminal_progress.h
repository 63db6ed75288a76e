// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "progress.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

namespace tessera::cli {

/// A progress bar on stderr, drawn only when stderr is a terminal and not silenced. Thread-safe and
/// throttled to ten redraws a second. Ctrl-C sets the cancel flag, so operations stop cleanly and
/// leave nothing behind.
class TerminalProgress : public Progress {
public:
    enum class Unit { Items, Bytes };
    TerminalProgress(std::string label, Unit unit, bool quiet);
    ~TerminalProgress() override;

    void report(std::uint64_t done, std::uint64_t total, const std::string& text) override;
    bool isCanceled() const override;
    /// Clears the bar line.
    void finish();

private:
    void draw(std::uint64_t done, std::uint64_t total, const std::string& text, bool force);

    std::string m_label;
    Unit m_unit;
    bool m_enabled;
    std::mutex m_mutex;
    std::chrono::steady_clock::time_point m_start;
    std::chrono::steady_clock::time_point m_lastDraw;
    bool m_drawn = false;
};

/// Installs a SIGINT handler that sets the flag TerminalProgress::isCanceled() reads.
void installInterruptHandler();

} // namespace tessera::cli
