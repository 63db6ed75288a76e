// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QStringList>
#include <QThreadPool>

#include <atomic>
#include <memory>

namespace tessera {
struct PreparedSplit;
}

namespace tessera::ui {

/// The result of a split on the GUI side.
struct SplitResult {
    bool ok = false;
    bool canceled = false;
    QString message; ///< error, or a one-line summary
    QString outputDir; ///< the folder written, when ok
    QStringList notes;
};

/// Runs a prepared split on a worker thread. Progress (bytes written, current tensor) is throttled to ~10 updates
/// a second and delivered on the GUI thread; Cancel sets the engine's cancel flag, and nothing is left behind.
/// The destructor cancels and waits.
class SplitJob : public QObject {
    Q_OBJECT
public:
    explicit SplitJob(QObject* parent = nullptr);
    ~SplitJob() override;

    /// Writes `prepared` into its target (tessera::runPreparedSplit()), as `tessera split` runs the same request.
    void start(std::shared_ptr<const tessera::PreparedSplit> prepared);
    void cancel();
    /// From start() until its result is handled on the GUI thread (a finished worker's result may still be queued).
    bool isRunning() const;

Q_SIGNALS:
    void progress(quint64 bytesDone, quint64 bytesTotal, const QString& currentTensor);
    void finished(const tessera::ui::SplitResult& result);

private:
    QThreadPool m_pool;
    QFutureWatcher<SplitResult>* m_watcher = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancel;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::SplitResult)
