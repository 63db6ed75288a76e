// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QThreadPool>

namespace tessera::ui {

/// What a scan produces: the checkpoint, or the error message when nothing could be read.
struct ScanOutcome {
    CheckpointPtr checkpoint;
    QString error;
};

/// Runs tessera::scanCheckpoint on a worker thread and publishes the result on the GUI thread.
///
/// Each start() supersedes the previous scan: the old one is canceled and its result dropped by a generation
/// counter, so a slow scan of a folder opened earlier can never replace the one opened last. The destructor
/// cancels and waits, so no worker outlives the job.
class ScanJob : public QObject {
    Q_OBJECT
public:
    explicit ScanJob(QObject* parent = nullptr);
    ~ScanJob() override;

    void start(const QString& path, const QString& hfModelPath = {});
    void cancel();
    /// From start() until its result is handled on the GUI thread (a finished worker's result may still be queued).
    bool isRunning() const;
    QString path() const { return m_path; }

    /// The synchronous worker body, public for tests: scans `path` reporting to `promise`.
    static void run(QPromise<ScanOutcome>& promise, const QString& path, const QString& hfModelPath);

Q_SIGNALS:
    void started(const QString& path);
    /// Throttled at the source: at most once per per-mille step.
    void progress(int permille, const QString& text);
    void finished(const tessera::ui::CheckpointPtr& checkpoint);
    void failed(const QString& message);
    void canceled();

private:
    void onFinished(quint64 generation);

    QThreadPool m_pool;
    QFutureWatcher<ScanOutcome>* m_watcher = nullptr;
    quint64 m_generation = 0;
    QString m_path;
};

} // namespace tessera::ui
