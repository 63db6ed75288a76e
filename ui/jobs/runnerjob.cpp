// SPDX-License-Identifier: GPL-3.0-or-later
#include "runnerjob.h"

#include "latestonlyrunner.h"

namespace tessera::ui {

RunnerJob::RunnerJob(QObject* parent) : QObject(parent), m_runner(new LatestOnlyRunner(this)) { }

RunnerJob::~RunnerJob()
{
    // The runner waits for its worker, whose queued reports name this job: it goes first.
    delete m_runner;
}

std::function<void(quint64, quint64, QString)> RunnerJob::progressSender(quint64 generation)
{
    return [this, generation](quint64 done, quint64 total, QString text) {
        postIfLatest(generation, [this, done, total, text] { Q_EMIT progress(done, total, text); });
    };
}

void RunnerJob::postIfLatest(quint64 generation, std::function<void()> deliver)
{
    QMetaObject::invokeMethod(
        this,
        [this, generation, deliver = std::move(deliver)] {
            if (isLatest(generation))
                deliver();
        },
        Qt::QueuedConnection);
}

void RunnerJob::cancel()
{
    const bool running = m_runner->isRunning();
    ++m_generation;
    m_runner->cancel();
    if (running)
        Q_EMIT canceled();
}

bool RunnerJob::isRunning() const { return m_runner->isRunning(); }

} // namespace tessera::ui
