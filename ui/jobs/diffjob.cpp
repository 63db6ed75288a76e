// SPDX-License-Identifier: GPL-3.0-or-later
#include "diffjob.h"

#include "retirewatcher.h"
#include "formats/scan.h"

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

/// Scan progress of B, shown as the first phase; the scanner reports per file from several threads.
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

void DiffJob::start(CheckpointPtr a, const QString& referencePath, const tessera::DiffOptions& options,
                    const QString& pathA)
{
    run(std::move(a), pathA, referencePath, options, false);
}

void DiffJob::startLoraUpdate(CheckpointPtr a, const tessera::DiffOptions& options)
{
    run(std::move(a), QString(), QString(), options, true);
}

void DiffJob::run(CheckpointPtr a, const QString& pathA, const QString& referencePath,
                  const tessera::DiffOptions& options, bool loraUpdate)
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
    const std::string reference = referencePath.toStdString();
    const std::string otherA = pathA.toStdString();
    m_watcher->setFuture(QtConcurrent::run(&m_pool, [this, a, otherA, reference, options, cancelFlag, post,
                                                     loraUpdate]() mutable {
        DiffOutcome outcome;
        StreamingProgress streaming(cancelFlag, [this, post](int permille, const QString& text, DiffRowBatch rows) {
            post([this, permille, text, rows = std::move(rows)] {
                if (!rows.empty())
                    Q_EMIT rowsFinished(rows);
                Q_EMIT progress(permille, tr("Comparing %1").arg(text));
            });
        });
        try {
            ScanPhaseProgress scanProgress(streaming, [this, post](const std::string& text) {
                post([this, text = QString::fromStdString(text)] { Q_EMIT progress(0, tr("Scanning B: %1").arg(text)); });
            });
            if (!otherA.empty()) {
                ScanPhaseProgress scanProgressA(streaming, [this, post](const std::string& text) {
                    post([this, text = QString::fromStdString(text)] { Q_EMIT progress(0, tr("Scanning A: %1").arg(text)); });
                });
                auto scannedA = tessera::scanCheckpoint(otherA, {}, scanProgressA);
                if (!scannedA) {
                    outcome.error = QString::fromStdString(scannedA.error().withContext("A").message);
                    return outcome;
                }
                a = std::make_shared<const tessera::CheckpointInfo>(std::move(*scannedA));
            }
            auto mappedA = tessera::withHfNames(*a, {});
            if (loraUpdate && mappedA && mappedA->loraDeltas.empty())
                mappedA = tessera::makeError("the checkpoint has no LoRA update to show (not a LoRA checkpoint with "
                                             "its base weights)");
            // B: the reference, or (a LoRA update) A's own base weights.
            auto b = loraUpdate ? tessera::Result<tessera::CheckpointInfo>(tessera::CheckpointInfo())
                                : tessera::scanCheckpoint(reference, {}, scanProgress);
            if (!b) {
                outcome.error = QString::fromStdString(b.error().withContext(reference).message);
                return outcome;
            }
            auto mappedB = loraUpdate ? (mappedA ? tessera::Result<tessera::CheckpointInfo>(mappedA->withoutLoraUpdates())
                                                 : mappedA)
                                      : tessera::withHfNames(*b, {});
            if (!mappedA || !mappedB) {
                outcome.error = QString::fromStdString((mappedA ? mappedB.error() : mappedA.error()).message);
                return outcome;
            }
            auto sideA = std::make_shared<const tessera::CheckpointInfo>(std::move(*mappedA));
            auto sideB = std::make_shared<const tessera::CheckpointInfo>(std::move(*mappedB));
            post([this, sideA, sideB, rows = tessera::pairTensors(*sideA, *sideB)] { Q_EMIT paired(sideA, sideB, rows); });
            auto report = tessera::diffCheckpoints(*sideA, *sideB, options, streaming,
                                                   [&](std::size_t index, const tessera::TensorDiff& row) {
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
    const bool wasRunning = !watcher->isFinished();
    retireWatcher(watcher, this);
    if (wasRunning)
        Q_EMIT canceled();
}

bool DiffJob::isRunning() const { return m_watcher && !m_watcher->isFinished(); }

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
