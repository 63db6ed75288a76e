// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QElapsedTimer>
#include <QString>

#include <cstdint>

namespace tessera::ui {

/// Turns "bytes done of total" samples into a smoothed rate and an ETA for the merge panel. The rate is an
/// exponential moving average over samples at least 250 ms apart, so a burst of small tensors does not make
/// the ETA jump around.
class ThroughputMeter {
public:
    void start(std::uint64_t totalBytes);
    /// Records progress at `elapsedMs` since start (tests pass it explicitly; the panel uses elapsed()).
    void sample(std::uint64_t doneBytes, qint64 elapsedMs);
    void sample(std::uint64_t doneBytes) { sample(doneBytes, m_timer.isValid() ? m_timer.elapsed() : 0); }

    double bytesPerSecond() const { return m_rate; }
    /// Seconds left, -1 while unknown.
    qint64 etaSeconds() const;
    /// "1.23 GB/s · ETA 0:42"
    QString text() const;

private:
    QElapsedTimer m_timer;
    std::uint64_t m_total = 0;
    std::uint64_t m_lastBytes = 0;
    qint64 m_lastMs = 0;
    std::uint64_t m_done = 0;
    double m_rate = 0;
};

} // namespace tessera::ui
