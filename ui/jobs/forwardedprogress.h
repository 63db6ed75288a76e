// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "progress.h"

#include <QElapsedTimer>
#include <QString>

#include <functional>
#include <mutex>
#include <utility>

namespace tessera::ui {

/// A LatestOnlyRunner run's progress sent on to its job at most ten times a second (and always the last report),
/// so a run over thousands of small tensors cannot flood the GUI thread; cancellation is the runner's. `send`
/// queues the report to the job (tagged with the run's generation, so a superseded run's reports are dropped);
/// the core may report from several threads, hence the mutex.
class ForwardedProgress final : public tessera::Progress {
public:
    ForwardedProgress(tessera::Progress& runner, std::function<void(quint64, quint64, QString)> send)
        : m_runner(runner), m_send(std::move(send))
    {
        m_clock.start();
    }
    void report(std::uint64_t done, std::uint64_t total, const std::string& text) override
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (done < total && m_clock.elapsed() - m_last < 100)
            return;
        m_last = m_clock.elapsed();
        m_send(done, total, QString::fromStdString(text));
    }
    bool isCanceled() const override { return m_runner.isCanceled(); }

private:
    tessera::Progress& m_runner;
    std::function<void(quint64, quint64, QString)> m_send;
    std::mutex m_mutex;
    QElapsedTimer m_clock;
    qint64 m_last = -1000;
};

} // namespace tessera::ui
