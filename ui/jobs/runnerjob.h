// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QObject>
#include <QString>

#include <functional>

namespace tessera::ui {

class LatestOnlyRunner;

/// What the workbench's read-on-a-worker jobs share (the Training page's, the Run page's): one run at a time on a
/// LatestOnlyRunner, a start superseding the running one; progress sent from the worker at most ten times a second
/// (ForwardedProgress) and dropped once superseded; cancel; the destructor cancels and waits.
class RunnerJob : public QObject {
    Q_OBJECT
public:
    explicit RunnerJob(QObject* parent = nullptr);
    ~RunnerJob() override;

    /// Stops the running read; canceled() says so when one was running.
    void cancel();
    bool isRunning() const;

Q_SIGNALS:
    void progress(quint64 done, quint64 total, const QString& text);
    void failed(const QString& message);
    void canceled();

protected:
    LatestOnlyRunner* runner() const { return m_runner; }
    /// A new run's generation: what it delivers is dropped once another starts or it is canceled.
    quint64 nextGeneration() { return ++m_generation; }
    bool isLatest(quint64 generation) const { return generation == m_generation; }
    /// How run `generation`'s ForwardedProgress sends its reports: queued to progress() on the GUI thread.
    std::function<void(quint64, quint64, QString)> progressSender(quint64 generation);
    /// Runs `deliver` on the GUI thread (from any thread) unless run `generation` was superseded by then.
    void postIfLatest(quint64 generation, std::function<void()> deliver);

private:
    LatestOnlyRunner* m_runner;
    quint64 m_generation = 0;
};

} // namespace tessera::ui
