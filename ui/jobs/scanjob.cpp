// SPDX-License-Identifier: GPL-3.0-or-later
#include "scanjob.h"

#include "background.h"
#include "retirewatcher.h"
#include "formats/scan.h"
#include "mapping/hf_parameter_check.h"

#include <QPromise>
#include <QtConcurrent>

#include <atomic>
#include <exception>
#include <mutex>

namespace tessera::ui {

namespace {

/// Maps the core's Progress onto a QPromise. The scanner reports from several reader threads, hence the
/// mutex; only per-mille changes reach the promise so a 100,000-file scan cannot flood the event loop.
class PromiseProgress final : public tessera::Progress {
public:
    explicit PromiseProgress(QPromise<ScanOutcome>& promise) : m_promise(promise) { }

    void report(std::uint64_t done, std::uint64_t total, const std::string& text) override
    {
        const int permille = total == 0 ? 0 : static_cast<int>(std::min<std::uint64_t>(1000, done * 1000 / total));
        if (permille == m_last.load(std::memory_order_relaxed))
            return;
        std::lock_guard<std::mutex> lock(m_mutex);
        if (permille == m_last.load(std::memory_order_relaxed))
            return;
        m_last.store(permille, std::memory_order_relaxed);
        m_promise.setProgressValueAndText(permille, QString::fromStdString(text));
    }
    bool isCanceled() const override { return m_promise.isCanceled(); }

private:
    QPromise<ScanOutcome>& m_promise;
    std::mutex m_mutex;
    std::atomic<int> m_last { -1 };
};

} // namespace

ScanJob::ScanJob(QObject* parent) : QObject(parent)
{
    // One scan at a time; the scanner runs its own parallel file readers.
    m_pool.setMaxThreadCount(1);
}

ScanJob::~ScanJob()
{
    cancel();
    m_pool.waitForDone();
}

void ScanJob::run(QPromise<ScanOutcome>& promise, const QString& path, const QString& hfModelPath)
{
    yieldToInterface();
    promise.setProgressRange(0, 1000);
    PromiseProgress progress(promise);
    tessera::ScanOptions options;
    options.hfModelPath = hfModelPath.toStdString();
    ScanOutcome outcome;
    // Exceptions must not unwind into QtConcurrent; the core promises none, but a bad_alloc on a huge index can.
    try {
        auto result = tessera::scanCheckpoint(path.toStdString(), options, progress);
        // What config.json expects is checked as `tessera inspect` and `tessera merge` check it, so the summary
        // lists a missing parameter and the Merge page refuses the checkpoint (no option here can fail it).
        if (result)
            (void)tessera::checkExpectedParameters(*result, {});
        if (result)
            outcome.checkpoint = std::make_shared<const tessera::CheckpointInfo>(std::move(result).value());
        else
            outcome.error = QString::fromStdString(result.error().message);
    } catch (const std::exception& e) {
        outcome.error = QString::fromLocal8Bit(e.what());
    }
    if (!promise.isCanceled())
        promise.addResult(std::move(outcome));
}

void ScanJob::start(const QString& path, const QString& hfModelPath)
{
    cancel();
    const quint64 generation = ++m_generation;
    m_path = path;
    // A fresh watcher per scan: the old one may still deliver a queued finished() that we want to ignore.
    m_watcher = new QFutureWatcher<ScanOutcome>(this);
    connect(m_watcher, &QFutureWatcher<ScanOutcome>::progressValueChanged, this, [this, generation](int value) {
        if (generation == m_generation && m_watcher)
            Q_EMIT progress(value, m_watcher->progressText());
    });
    connect(m_watcher, &QFutureWatcher<ScanOutcome>::finished, this, [this, generation] { onFinished(generation); });
    m_watcher->setFuture(QtConcurrent::run(&m_pool, &ScanJob::run, path, hfModelPath));
    Q_EMIT started(path);
}

void ScanJob::cancel()
{
    if (!m_watcher)
        return;
    auto* watcher = m_watcher;
    m_watcher = nullptr;
    ++m_generation;
    watcher->cancel();
    retireWatcher(watcher, this);
    Q_EMIT canceled();
}

bool ScanJob::isRunning() const { return m_watcher != nullptr; }

void ScanJob::onFinished(quint64 generation)
{
    if (generation != m_generation || !m_watcher)
        return; // superseded
    auto* watcher = m_watcher;
    m_watcher = nullptr;
    watcher->deleteLater();
    const auto future = watcher->future();
    if (future.isCanceled() || future.resultCount() == 0) {
        Q_EMIT canceled();
        return;
    }
    const ScanOutcome outcome = future.result();
    if (outcome.checkpoint)
        Q_EMIT finished(outcome.checkpoint);
    else
        Q_EMIT failed(outcome.error);
}

} // namespace tessera::ui
