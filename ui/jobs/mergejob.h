// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QStringList>
#include <QThreadPool>

#include <atomic>
#include <memory>

namespace tessera {
struct PreparedMerge;
}

namespace tessera::ui {

/// Where a running merge is, as the panel shows it.
struct MergeStatus {
    quint64 bytesDone = 0;
    quint64 bytesTotal = 0;
    qint64 tensorsDone = 0;
    qint64 tensorsTotal = 0;
    QString currentTensor;
};

/// The result of a merge on the GUI side: an error message, or what was written.
struct MergeResult {
    bool ok = false;
    bool canceled = false;
    QString message;      ///< error, or a one-line summary
    QString outputDir; ///< the folder written, when ok
    QStringList warnings;
};

/// Runs a prepared merge on a worker thread. Progress comes from the engine's worker threads, is
/// throttled to ~10 updates a second and delivered on the GUI thread; Cancel sets the engine's cancel flag, and
/// the engine leaves nothing behind. The destructor cancels and waits.
class MergeJob : public QObject {
    Q_OBJECT
public:
    explicit MergeJob(QObject* parent = nullptr);
    ~MergeJob() override;

    /// Runs `prepared` (tessera::runPreparedMerge(): the models into the target atomically, or the GGUF file), as
    /// `tessera merge` runs the same request.
    void start(std::shared_ptr<const tessera::PreparedMerge> prepared);
    void cancel();
    /// From start() until its result is handled on the GUI thread (a finished worker's result may still be queued).
    bool isRunning() const;

Q_SIGNALS:
    void progress(const tessera::ui::MergeStatus& status);
    void finished(const tessera::ui::MergeResult& result);

private:
    QThreadPool m_pool;
    QFutureWatcher<MergeResult>* m_watcher = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancel;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::MergeStatus)
Q_DECLARE_METATYPE(tessera::ui::MergeResult)
