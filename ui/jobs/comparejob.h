// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QStringList>
#include <QThreadPool>

#include <atomic>
#include <memory>

#include "ops/prepare_model.h"
#include "ops/test_request.h"

namespace tessera::ui {

/// The verdict of `tessera test` as the merge panel logs it.
struct CompareResult {
    bool ok = false;          ///< every tensor equal
    bool canceled = false;
    QString message;          ///< error, or the summary line
    QStringList lines;        ///< one line per tensor ("ok" or what differs)
    int failures = 0;
};

/// Runs a test (what `tessera test` runs: the merge in memory, tensor by tensor, against a Hugging Face folder) on a
/// worker. Progress is in bytes, throttled to ~10 updates a second; cancel stops
/// between tensors. Nothing is written. The destructor cancels and waits.
class CompareJob : public QObject {
    Q_OBJECT
public:
    explicit CompareJob(QObject* parent = nullptr);
    ~CompareJob() override;

    /// Prepares `request` (with the scans of `context`) and runs it: tessera::prepareTest() and runPreparedTest(),
    /// what `tessera test` runs for the same request.
    void start(const tessera::TestRequest& request, tessera::PrepareContext context);
    void cancel();
    /// From start() until its result is handled on the GUI thread (a finished worker's result may still be queued).
    bool isRunning() const;

Q_SIGNALS:
    void progress(quint64 bytesDone, quint64 bytesTotal, const QString& current);
    void finished(const tessera::ui::CompareResult& result);

private:
    QThreadPool m_pool;
    QFutureWatcher<CompareResult>* m_watcher = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancel;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::CompareResult)
