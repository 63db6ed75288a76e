// SPDX-License-Identifier: GPL-3.0-or-later
#include "splitjob.h"

#include "background.h"
#include "coreconvert.h"
#include "ops/prepare_split.h"

#include <QElapsedTimer>
#include <QtConcurrent>

#include <exception>
#include <mutex>

namespace tessera::ui {

namespace {

/// The engine's progress, forwarded to the GUI thread at most ten times a second.
class ThrottledProgress : public tessera::Progress {
public:
    ThrottledProgress(SplitJob* job, const std::atomic<bool>* cancel) : m_job(job), m_cancel(cancel) { m_clock.start(); }
    void report(std::uint64_t done, std::uint64_t total, const std::string& text) override
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (done < total && m_clock.elapsed() - m_last < 100)
            return;
        m_last = m_clock.elapsed();
        const QString current = QString::fromStdString(text);
        QMetaObject::invokeMethod(
            m_job, [job = m_job, done, total, current] { Q_EMIT job->progress(done, total, current); }, Qt::QueuedConnection);
    }
    bool isCanceled() const override { return m_cancel->load(); }

private:
    SplitJob* m_job;
    const std::atomic<bool>* m_cancel;
    std::mutex m_mutex;
    QElapsedTimer m_clock;
    qint64 m_last = -1000;
};

} // namespace

SplitJob::SplitJob(QObject* parent) : QObject(parent) { m_pool.setMaxThreadCount(1); }

SplitJob::~SplitJob()
{
    cancel();
    m_pool.waitForDone();
}

void SplitJob::start(std::shared_ptr<const tessera::PreparedSplit> prepared)
{
    if (isRunning() || !prepared)
        return;
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    auto cancelFlag = m_cancel;
    m_watcher = new QFutureWatcher<SplitResult>(this);
    connect(m_watcher, &QFutureWatcher<SplitResult>::finished, this, [this] {
        auto* watcher = m_watcher;
        m_watcher = nullptr;
        watcher->deleteLater();
        Q_EMIT finished(watcher->future().result());
    });
    // `this` outlives the worker (the destructor waits), so the queued progress calls may use it.
    m_watcher->setFuture(runInBackground(&m_pool, [this, prepared, cancelFlag]() {
        SplitResult result;
        ThrottledProgress progress(this, cancelFlag.get());
        tessera::SplitRunOptions options;
        options.progress = &progress;
        options.cancel = cancelFlag.get();
        try {
            auto outcome = tessera::runPreparedSplit(*prepared, options);
            if (outcome) {
                result.ok = true;
                result.outputDir = QString::fromStdString(outcome->outputDir);
                result.message = writtenSummary(outcome->files.size(), outcome->bytesWritten, outcome->seconds,
                                                outcome->outputDir);
                for (const auto& n : outcome->notes)
                    result.notes << QString::fromStdString(n);
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

void SplitJob::cancel()
{
    if (m_cancel)
        m_cancel->store(true);
}

bool SplitJob::isRunning() const { return m_watcher != nullptr; }

} // namespace tessera::ui
