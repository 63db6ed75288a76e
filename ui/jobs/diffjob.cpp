// SPDX-License-Identifier: GPL-3.0-or-later
#include "diffjob.h"

#include "background.h"
#include "retirewatcher.h"
#include "ops/prepare_diff.h"

#include <QElapsedTimer>
#include <QPointer>
#include <QtConcurrent>

#include <exception>
#include <mutex>

namespace tessera::ui {

namespace {

/// The core's Progress for the diff: cancel from the GUI's flag, progress and finished rows handed to `post`
/// (which queues them to the GUI thread) at most every 100 ms, so thousands of small tensors cannot flood the
/// event loop. Called from the engine's worker threads, hence the mutex.
class StreamingProgress final : public tessera::Progress {
public:
    using Post = std::function<void(int permille, const QString& text, DiffRowBatch rows)>;
    StreamingProgress(std::shared_ptr<std::atomic<bool>> cancel, Post post)
        : m_cancel(std::move(cancel)), m_post(std::move(post))
    {
        m_clock.start();
    }

    void report(std::uint64_t done, std::uint64_t total, const std::string& text) override
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_permille = total == 0 ? 0 : static_cast<int>(std::min<std::uint64_t>(1000, done * 1000 / total));
        m_text = QString::fromStdString(text);
        if (m_clock.elapsed() - m_last >= 100)
            flushLocked();
    }
    bool isCanceled() const override { return m_cancel->load(std::memory_order_relaxed); }

    void addRow(std::size_t index, const tessera::TensorDiff& row)
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_rows.emplace_back(index, row);
    }
    void flush()
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        flushLocked();
    }

private:
    void flushLocked()
    {
        m_last = m_clock.elapsed();
        m_post(m_permille, m_text, std::exchange(m_rows, {}));
    }

    std::shared_ptr<std::atomic<bool>> m_cancel;
    Post m_post;
    std::mutex m_mutex;
    QElapsedTimer m_clock;
    qint64 m_last = -1000;
    int m_permille = 0;
    QString m_text;
    DiffRowBatch m_rows;
};

/// Scan progress of the sides, shown as the first phase; the scanner reports per file from several threads.
class ScanPhaseProgress final : public tessera::Progress {
public:
    ScanPhaseProgress(const StreamingProgress& parent, std::function<void(const std::string&)> post)
        : m_parent(parent), m_post(std::move(post))
    {
        m_clock.start();
    }
    void report(std::uint64_t, std::uint64_t, const std::string& text) override
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_clock.elapsed() - m_last < 100)
            return;
        m_last = m_clock.elapsed();
        m_post(text);
    }
    bool isCanceled() const override { return m_parent.isCanceled(); }

private:
    const StreamingProgress& m_parent;
    std::function<void(const std::string&)> m_post;
    std::mutex m_mutex;
    QElapsedTimer m_clock;
    qint64 m_last = -1000;
};

} // namespace

DiffJob::DiffJob(QObject* parent) : QObject(parent)
{
    // One diff at a time; the engine compares tensors on its own threads.
    m_pool.setMaxThreadCount(1);
}

DiffJob::~DiffJob()
{
    cancel();
    m_pool.waitForDone();
}

void DiffJob::start(const tessera::DiffRequest& request, tessera::PrepareContext context)
{
    cancel();
    const quint64 generation = ++m_generation;
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    auto cancelFlag = m_cancel;
    m_watcher = new QFutureWatcher<DiffOutcome>(this);
    connect(m_watcher, &QFutureWatcher<DiffOutcome>::finished, this, [this, generation] { onFinished(generation); });
    // Everything the worker hands over goes through queued calls on `this` and is dropped when superseded; `this`
    // outlives the worker (the destructor waits).
    auto post = [this, generation](auto fn) {
        QMetaObject::invokeMethod(
            this,
            [this, generation, fn = std::move(fn)] {
                if (generation == m_generation)
                    fn();
            },
            Qt::QueuedConnection);
    };
    m_watcher->setFuture(runInBackground(&m_pool, [this, request, context, cancelFlag, post]() mutable {
        DiffOutcome outcome;
        StreamingProgress streaming(cancelFlag, [this, post](int permille, const QString& text, DiffRowBatch rows) {
            post([this, permille, text, rows = std::move(rows)] {
                if (!rows.empty())
                    Q_EMIT rowsFinished(rows);
                Q_EMIT progress(permille, tr("Comparing %1").arg(text));
            });
        });
        try {
            ScanPhaseProgress scanning(streaming, [this, post](const std::string& text) {
                post([this, text = QString::fromStdString(text)] { Q_EMIT progress(0, tr("Scanning %1").arg(text)); });
            });
            context.progress = &scanning;
            const tessera::PreparedDiff prepared = tessera::prepareDiff(request, context);
            if (prepared.refusal) {
                outcome.error = QString::fromStdString(prepared.refusal->error.message);
                outcome.canceled = cancelFlag->load();
                return outcome;
            }
            QStringList warnings;
            for (const auto& w : prepared.warnings)
                warnings << QString::fromStdString(w);
            post([this, a = prepared.a, b = prepared.b,
                  rows = tessera::pairTensors(*prepared.a, *prepared.b, prepared.options), warnings,
                  models = QString::fromStdString(prepared.models)] { Q_EMIT paired(a, b, rows, warnings, models); });
            auto report = tessera::runPreparedDiff(prepared, streaming, [&](std::size_t index, const tessera::TensorDiff& row) {
                streaming.addRow(index, row);
            });
            streaming.flush();
            if (report)
                outcome.report = std::make_shared<const tessera::DiffReport>(std::move(*report));
            else
                outcome.error = QString::fromStdString(report.error().message);
        } catch (const std::exception& e) {
            // The core returns errors as values; only an allocation failure can get here.
            outcome.error = QString::fromLocal8Bit(e.what());
        }
        outcome.canceled = cancelFlag->load();
        return outcome;
    }));
    Q_EMIT started();
}

void DiffJob::cancel()
{
    if (!m_watcher)
        return;
    m_cancel->store(true);
    auto* watcher = m_watcher;
    m_watcher = nullptr;
    ++m_generation;
    retireWatcher(watcher, this);
    Q_EMIT canceled();
}

bool DiffJob::isRunning() const { return m_watcher != nullptr; }

void DiffJob::onFinished(quint64 generation)
{
    if (generation != m_generation || !m_watcher)
        return;
    auto* watcher = m_watcher;
    m_watcher = nullptr;
    watcher->deleteLater();
    const DiffOutcome outcome = watcher->future().result();
    if (outcome.canceled)
        Q_EMIT canceled();
    else if (outcome.report)
        Q_EMIT finished(outcome.report);
    else
        Q_EMIT failed(outcome.error);
}

} // namespace tessera::ui
