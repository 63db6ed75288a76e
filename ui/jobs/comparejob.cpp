// SPDX-License-Identifier: GPL-3.0-or-later
#include "comparejob.h"

#include "background.h"
#include "ops/prepare_test.h"

#include <QElapsedTimer>
#include <QPointer>
#include <QtConcurrent>

#include <exception>
#include <mutex>

namespace tessera::ui {

namespace {
/// The core's Progress for a GUI job: the engine reports from its worker threads, so the throttle is locked and
/// the signal is queued to the job's thread.
class QueuedProgress : public tessera::Progress {
public:
    QueuedProgress(CompareJob* job, const std::atomic<bool>* cancel) : m_job(job), m_cancel(cancel) { m_timer.start(); }

    void report(std::uint64_t done, std::uint64_t total, const std::string& text) override
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (done < total && m_timer.elapsed() - m_last < 100)
            return;
        m_last = m_timer.elapsed();
        const QString current = QString::fromStdString(text);
        CompareJob* job = m_job;
        QMetaObject::invokeMethod(
            job, [job, done, total, current] { Q_EMIT job->progress(done, total, current); }, Qt::QueuedConnection);
    }
    bool isCanceled() const override { return m_cancel->load(); }

private:
    CompareJob* m_job;
    const std::atomic<bool>* m_cancel;
    std::mutex m_mutex;
    QElapsedTimer m_timer;
    qint64 m_last = -1000;
};
/// The prepare's progress: only its cancel (the scans it may make are quick beside the comparison).
class CancelOnly final : public tessera::Progress {
public:
    explicit CancelOnly(const std::atomic<bool>* cancel) : m_cancel(cancel) { }
    bool isCanceled() const override { return m_cancel->load(); }

private:
    const std::atomic<bool>* m_cancel;
};
} // namespace

CompareJob::CompareJob(QObject* parent) : QObject(parent) { m_pool.setMaxThreadCount(1); }

CompareJob::~CompareJob()
{
    cancel();
    m_pool.waitForDone();
}

void CompareJob::start(const tessera::TestRequest& request, tessera::PrepareContext context)
{
    if (isRunning())
        return;
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    m_watcher = new QFutureWatcher<CompareResult>(this);
    connect(m_watcher, &QFutureWatcher<CompareResult>::finished, this, [this] {
        auto* watcher = m_watcher;
        m_watcher = nullptr;
        watcher->deleteLater();
        Q_EMIT finished(watcher->future().result());
    });
    // `this` outlives the worker (the destructor waits), so the queued progress may point at it.
    m_watcher->setFuture(runInBackground(&m_pool, [this, request, context, cancel = m_cancel]() mutable {
        CompareResult result;
        QueuedProgress progress(this, cancel.get());
        try {
            CancelOnly preparing(cancel.get());
            context.progress = &preparing;
            const tessera::PreparedTest prepared = tessera::prepareTest(request, context);
            auto report = tessera::runPreparedTest(prepared, progress);
            if (!report) {
                result.canceled = cancel->load();
                result.message = QString::fromStdString(report.error().message);
                return result;
            }
            const QString text = QString::fromStdString(report->text());
            result.lines = text.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
            result.message = result.lines.isEmpty() ? QString() : result.lines.takeLast();
            result.failures = int(report->failures());
            result.ok = report->ok();
        } catch (const std::exception& e) {
            result.message = QString::fromLocal8Bit(e.what());
        }
        return result;
    }));
}

void CompareJob::cancel()
{
    if (m_cancel)
        m_cancel->store(true);
}

bool CompareJob::isRunning() const { return m_watcher != nullptr; }

} // namespace tessera::ui
