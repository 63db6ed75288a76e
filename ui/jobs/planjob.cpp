// SPDX-License-Identifier: GPL-3.0-or-later
#include "planjob.h"

#include "coreconvert.h"

#include "ops/flag_table.h"
#include "ops/vocabulary.h"

#include <QElapsedTimer>

#include <mutex>

namespace tessera::ui {

namespace {

/// The runner's cancel, and the prepare's progress text posted to the job at most ten times a second.
class PostingProgress final : public tessera::Progress {
public:
    PostingProgress(tessera::Progress& runner, PlanJob* job) : m_runner(runner), m_job(job) { m_clock.start(); }
    void report(std::uint64_t, std::uint64_t, const std::string& text) override
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_clock.elapsed() - m_last < 100)
            return;
        m_last = m_clock.elapsed();
        QMetaObject::invokeMethod(
            m_job, [job = m_job, text = QString::fromStdString(text)] { Q_EMIT job->progressText(text); },
            Qt::QueuedConnection);
    }
    bool isCanceled() const override { return m_runner.isCanceled(); }

private:
    tessera::Progress& m_runner;
    PlanJob* m_job;
    std::mutex m_mutex;
    QElapsedTimer m_clock;
    qint64 m_last = -1000;
};

} // namespace

PlanJob::PlanJob(QObject* parent) : QObject(parent), m_runner(new LatestOnlyRunner(this))
{
    m_delay.setSingleShot(true);
    connect(&m_delay, &QTimer::timeout, this, &PlanJob::launch);
}

PlanJob::~PlanJob()
{
    // The worker posts to this object: it must end before this object does.
    delete m_runner;
    m_runner = nullptr;
}

void PlanJob::schedule(Work work, int delayMs)
{
    const bool wasBusy = isBusy();
    m_runner->cancel();
    m_running = false;
    m_work = std::move(work);
    m_delay.start(delayMs);
    if (!wasBusy)
        Q_EMIT busyChanged(true);
}

void PlanJob::cancel()
{
    const bool wasBusy = isBusy();
    m_delay.stop();
    m_runner->cancel();
    m_running = false;
    m_work = nullptr;
    if (wasBusy)
        Q_EMIT busyChanged(false);
}

void PlanJob::launch()
{
    if (!m_work)
        return;
    m_running = true;
    m_runner->start([this, work = std::exchange(m_work, nullptr)](tessera::Progress& runner) -> std::function<void()> {
        PostingProgress progress(runner, this);
        auto deliver = work(progress);
        if (runner.isCanceled())
            return {};
        return [this, deliver] {
            m_running = false;
            if (deliver)
                deliver();
            if (!isBusy())
                Q_EMIT busyChanged(false);
        };
    });
}

tessera::ModelRequest loadedModelRequest(const tessera::CheckpointInfo& checkpoint)
{
    tessera::ModelRequest request;
    request.localDir = checkpoint.root;
    request.backend = tessera::backendForLayout(checkpoint.layout);
    if (!checkpoint.hfConfigDir.empty())
        request.hfModelPath = checkpoint.hfConfigDir;
    return request;
}

QString shownCommandLine(const std::string& command, std::vector<std::string> args, const std::string& placeholder)
{
    for (std::size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == "--target_dir" && args[i + 1].empty())
            args[i + 1] = placeholder;
    return qs(tessera::commandLineText(command, args));
}

tessera::ScannedCheckpoint loadedScan(const CheckpointPtr& checkpoint)
{
    return { checkpoint, checkpoint->root, std::string(), true };
}

} // namespace tessera::ui
