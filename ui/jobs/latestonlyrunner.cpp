// SPDX-License-Identifier: GPL-3.0-or-later
#include "latestonlyrunner.h"

#include "background.h"
#include "retirewatcher.h"

#include <QtConcurrent>

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

LatestOnlyRunner::LatestOnlyRunner(QObject* parent) : QObject(parent) { m_pool.setMaxThreadCount(1); }

LatestOnlyRunner::~LatestOnlyRunner()
{
    cancel();
    m_pool.waitForDone();
}

void LatestOnlyRunner::start(Work work)
{
    cancel();
    const quint64 generation = ++m_generation;
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    auto flag = m_cancel;
    m_watcher = new QFutureWatcher<std::function<void()>>(this);
    connect(m_watcher, &QFutureWatcher<std::function<void()>>::finished, this, [this, generation] {
        if (generation != m_generation || !m_watcher)
            return;
        auto* watcher = m_watcher;
        m_watcher = nullptr;
        watcher->deleteLater();
        if (const auto deliver = watcher->future().result())
            deliver();
    });
    m_watcher->setFuture(runInBackground(&m_pool, [work = std::move(work), flag]() {
        FlagProgress progress(flag);
        return work(progress);
    }));
}

void LatestOnlyRunner::cancel()
{
    if (!m_watcher)
        return;
    m_cancel->store(true);
    auto* watcher = m_watcher;
    m_watcher = nullptr;
    ++m_generation;
    retireWatcher(watcher, this);
}

bool LatestOnlyRunner::isRunning() const { return m_watcher != nullptr; }

} // namespace tessera::ui
