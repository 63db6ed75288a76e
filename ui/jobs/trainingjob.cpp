// SPDX-License-Identifier: GPL-3.0-or-later
#include "trainingjob.h"

#include "latestonlyrunner.h"

#include <QElapsedTimer>

#include <mutex>

namespace tessera::ui {

namespace {

/// The run's progress sent to the job on the GUI thread at most ten times a second, tagged with the run's
/// generation so a superseded run's reports are dropped; cancellation is the runner's.
class ForwardedProgress final : public tessera::Progress {
public:
    ForwardedProgress(tessera::Progress& runner, std::function<void(quint64, quint64, QString)> send)
        : m_runner(runner), m_send(std::move(send))
    {
        m_clock.start();
    }
    void report(std::uint64_t done, std::uint64_t total, const std::string& text) override
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (done < total && m_clock.elapsed() - m_last < 100)
            return;
        m_last = m_clock.elapsed();
        m_send(done, total, QString::fromStdString(text));
    }
    bool isCanceled() const override { return m_runner.isCanceled(); }

private:
    tessera::Progress& m_runner;
    std::function<void(quint64, quint64, QString)> m_send;
    std::mutex m_mutex;
    QElapsedTimer m_clock;
    qint64 m_last = -1000;
};

} // namespace

TrainingJob::TrainingJob(QObject* parent) : QObject(parent), m_runner(new LatestOnlyRunner(this)) { }

TrainingJob::~TrainingJob()
{
    // The runner waits for its worker, whose queued reports name this job: it goes first.
    delete m_runner;
}

void TrainingJob::readState(CheckpointPtr checkpoint)
{
    const quint64 generation = ++m_generation;
    m_runner->start(resultWork<tessera::TrainingState>(
        [checkpoint](tessera::Progress& progress) {
            return checkpoint ? tessera::readTrainingState(*checkpoint, 0, progress)
                              : tessera::Result<tessera::TrainingState>(tessera::TrainingState {});
        },
        [this, generation](const TrainingStatePtr& state) {
            if (generation == m_generation)
                Q_EMIT stateRead(state);
        },
        [this](const QString& error) { Q_EMIT failed(error); }));
}

void TrainingJob::computeNorms(TrainingStatePtr state)
{
    const quint64 generation = ++m_generation;
    auto send = [this, generation](quint64 done, quint64 total, QString text) {
        QMetaObject::invokeMethod(
            this,
            [this, generation, done, total, text] {
                if (generation == m_generation)
                    Q_EMIT progress(done, total, text);
            },
            Qt::QueuedConnection);
    };
    m_runner->start(resultWork<tessera::TrainingNorms>(
        [state, send](tessera::Progress& runner) {
            ForwardedProgress progress(runner, send);
            return tessera::computeTrainingNorms(*state, 0, progress);
        },
        [this](const TrainingNormsPtr& norms) { Q_EMIT normsComputed(norms); },
        [this](const QString& error) { Q_EMIT failed(error); }));
}

void TrainingJob::cancel()
{
    const bool running = m_runner->isRunning();
    ++m_generation;
    m_runner->cancel();
    if (running)
        Q_EMIT canceled();
}

bool TrainingJob::isRunning() const { return m_runner->isRunning(); }

} // namespace tessera::ui
