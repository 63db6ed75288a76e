// SPDX-License-Identifier: GPL-3.0-or-later
#include "mergejob.h"

#include "background.h"
#include "coreconvert.h"
#include "ops/prepare_merge.h"

#include <QElapsedTimer>
#include <QPromise>
#include <QtConcurrent>

#include <exception>

namespace tessera::ui {

MergeJob::MergeJob(QObject* parent) : QObject(parent)
{
    // One merge at a time; the engine runs its own writer threads.
    m_pool.setMaxThreadCount(1);
}

MergeJob::~MergeJob()
{
    cancel();
    m_pool.waitForDone();
}

void MergeJob::start(std::shared_ptr<const tessera::PreparedMerge> prepared)
{
    if (isRunning() || !prepared)
        return;
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    auto cancelFlag = m_cancel;
    m_watcher = new QFutureWatcher<MergeResult>(this);
    connect(m_watcher, &QFutureWatcher<MergeResult>::finished, this, [this] {
        auto* watcher = m_watcher;
        m_watcher = nullptr;
        watcher->deleteLater();
        Q_EMIT finished(watcher->future().result());
    });
    // `this` outlives the worker (the destructor waits), so the queued progress calls may capture it.
    m_watcher->setFuture(runInBackground(&m_pool, [this, prepared, cancelFlag]() {
        MergeResult result;
        tessera::MergeRunOptions options;
        options.cancel = cancelFlag.get();
        QElapsedTimer throttle;
        throttle.start();
        qint64 last = -1000;
        options.onProgress = [&, this](const tessera::MergeProgress& p) {
            // onProgress is serialised by the engine; keep the event loop to ~10 updates a second.
            const bool done = p.tensorsDone == p.tensorsTotal;
            if (!done && throttle.elapsed() - last < 100)
                return;
            last = throttle.elapsed();
            MergeStatus status { p.bytesDone, p.bytesTotal, qint64(p.tensorsDone), qint64(p.tensorsTotal),
                                 QString::fromStdString(p.currentTensor) };
            QMetaObject::invokeMethod(this, [this, status] { Q_EMIT progress(status); }, Qt::QueuedConnection);
        };
        try {
            auto outcome = tessera::runPreparedMerge(*prepared, options);
            if (outcome) {
                result.ok = true;
                result.outputDir = QString::fromStdString(outcome->outputDir);
                result.message = writtenSummary(outcome->files.size(), outcome->bytesWritten, outcome->seconds,
                                                outcome->outputDir);
                for (const auto& w : outcome->warnings)
                    result.warnings << QString::fromStdString(w);
                for (const auto& n : outcome->notes)
                    result.warnings << QString::fromStdString("note: " + n);
            } else {
                result.canceled = cancelFlag->load();
                result.message = QString::fromStdString(outcome.error().message);
            }
        } catch (const std::exception& e) {
            result.message = QString::fromLocal8Bit(e.what());
        }
        return result;
    }));
}

void MergeJob::cancel()
{
    if (m_cancel)
        m_cancel->store(true);
}

bool MergeJob::isRunning() const { return m_watcher != nullptr; }

} // namespace tessera::ui
