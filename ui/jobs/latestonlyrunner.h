// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "progress.h"

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QThreadPool>

#include <atomic>
#include <exception>
#include <functional>
#include <memory>

namespace tessera::ui {

/// Runs one computation at a time on a worker thread, for views that show "the tensor selected last": starting
/// another supersedes the running one (its result is dropped by a generation counter, its worker told to stop).
/// The work returns what to do with its result on the GUI thread, so each job keeps its own types and signals.
/// The destructor cancels and waits, so no worker outlives its job.
class LatestOnlyRunner : public QObject {
    Q_OBJECT
public:
    /// Runs on the worker; `progress` says when the run was canceled or superseded. The returned function runs
    /// on the GUI thread, only if this run is still the latest.
    using Work = std::function<std::function<void()>(tessera::Progress& progress)>;

    explicit LatestOnlyRunner(QObject* parent = nullptr);
    ~LatestOnlyRunner() override;

    void start(Work work);
    void cancel();
    /// From start() until the result is handled on the GUI thread or dropped: not QFutureWatcher::isFinished(),
    /// which in Qt 6 turns true when the worker returns, while its result still waits in the event queue.
    bool isRunning() const;

private:
    QThreadPool m_pool;
    QFutureWatcher<std::function<void()>>* m_watcher = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancel;
    quint64 m_generation = 0;
};

/// The usual work: `compute(progress)` returns a tessera::Result<T>. Its value reaches `done` as a shared pointer,
/// its error (unless the run was canceled) `failed` as a message; an exception (an allocation failure on a huge
/// tensor) is an error too.
template <typename T, typename Compute, typename Done, typename Failed>
LatestOnlyRunner::Work resultWork(Compute compute, Done done, Failed failed)
{
    return [compute, done, failed](tessera::Progress& progress) -> std::function<void()> {
        QString error;
        try {
            auto result = compute(progress);
            if (result) {
                auto shared = std::make_shared<const T>(std::move(*result));
                return [done, shared] { done(shared); };
            }
            error = QString::fromStdString(result.error().message);
        } catch (const std::exception& e) {
            error = QString::fromLocal8Bit(e.what());
        }
        if (progress.isCanceled())
            return {};
        return [failed, error] { failed(error); };
    };
}

} // namespace tessera::ui
