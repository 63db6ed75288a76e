// SPDX-License-Identifier: GPL-3.0-or-later
#include "diffdetailjob.h"

#include "retirewatcher.h"

#include <QtConcurrent>

#include <exception>

namespace tessera::ui {

namespace {
class FlagProgress final : public tessera::Progress {
public:
    explicit FlagProgress(std::shared_ptr<std::atomic<bool>> flag) : m_flag(std::move(flag)) { }
    bool isCanceled() const override { return m_flag->load(std::memory_order_relaxed); }

private:
    std::shared_ptr<std::atomic<bool>> m_flag;
};
} // namespace

DiffDetailJob::DiffDetailJob(QObject* parent) : QObject(parent) { m_pool.setMaxThreadCount(1); }

DiffDetailJob::~DiffDetailJob()
{
    cancel();
    m_pool.waitForDone();
}

void DiffDetailJob::start(CheckpointPtr a, CheckpointPtr b, const QString& tensor, const tessera::DiffOptions& options)
{
    cancel();
    const quint64 generation = ++m_generation;
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    auto flag = m_cancel;
    m_watcher = new QFutureWatcher<DiffDetailOutcome>(this);
    connect(m_watcher, &QFutureWatcher<DiffDetailOutcome>::finished, this, [this, generation, tensor] {
        if (generation != m_generation || !m_watcher)
            return;
        auto* watcher = m_watcher;
        m_watcher = nullptr;
        watcher->deleteLater();
        const DiffDetailOutcome outcome = watcher->future().result();
        if (outcome.detail)
            Q_EMIT finished(outcome.detail);
        else if (!m_cancel->load())
            Q_EMIT failed(tensor, outcome.error);
    });
    const std::string name = tensor.toStdString();
    m_watcher->setFuture(QtConcurrent::run(&m_pool, [a, b, name, options, flag]() {
        DiffDetailOutcome outcome;
        FlagProgress progress(flag);
        try {
            auto detail = tessera::diffTensorDetail(*a, *b, name, options, progress);
            if (detail)
                outcome.detail = std::make_shared<const tessera::TensorDiffDetail>(std::move(*detail));
            else
                outcome.error = QString::fromStdString(detail.error().message);
        } catch (const std::exception& e) {
            outcome.error = QString::fromLocal8Bit(e.what()); // allocation failure on a huge tensor
        }
        return outcome;
    }));
}

void DiffDetailJob::cancel()
{
    if (!m_watcher)
        return;
    m_cancel->store(true);
    auto* watcher = m_watcher;
    m_watcher = nullptr;
    ++m_generation;
    retireWatcher(watcher, this);
}

bool DiffDetailJob::isRunning() const { return m_watcher && !m_watcher->isFinished(); }

} // namespace tessera::ui
