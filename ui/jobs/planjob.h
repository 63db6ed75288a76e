// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "jobs/latestonlyrunner.h"

#include "ops/model_request.h"
#include "ops/prepare_model.h"

#include <QObject>
#include <QString>
#include <QTimer>

namespace tessera::ui {

/// Recomputes a page's plan (a prepare…() of core/ops) on a worker whenever the page's request changes, so the GUI
/// thread never scans or plans: a request is planned once typing pauses, a newer request supersedes the one being
/// planned (its worker told to stop, its result dropped), and isBusy() says when the plan on screen is not the
/// current request's. The destructor cancels and waits.
class PlanJob : public QObject {
    Q_OBJECT
public:
    /// Runs on the worker with the Progress to give the prepare (its cancel, its scans' progress); returns what to do
    /// with the result on the GUI thread.
    using Work = LatestOnlyRunner::Work;

    explicit PlanJob(QObject* parent = nullptr);
    ~PlanJob() override;

    /// Plans with `work` after `delayMs` without another schedule(); what was scheduled or running is dropped now.
    void schedule(Work work, int delayMs = 250);
    /// Drops what is scheduled or running.
    void cancel();
    /// A plan is scheduled or being computed.
    bool isBusy() const { return m_delay.isActive() || m_running; }

Q_SIGNALS:
    void busyChanged(bool busy);
    /// What the running prepare reads ("model_world_size_4_rank_0.pt"), a few times a second.
    void progressText(const QString& text);

private:
    void launch();

    QTimer m_delay;
    Work m_work;
    LatestOnlyRunner* m_runner;
    bool m_running = false;
};

/// The model flags with which the command line reads `checkpoint` as the workbench loaded it: its folder, the
/// --backend that reads its layout, and its config folder (the scan's root may be a subfolder, actor/model, where
/// the command line would not find config.json by itself).
tessera::ModelRequest loadedModelRequest(const tessera::CheckpointInfo& checkpoint);

/// `tessera COMMAND ARGS…` as a page shows it, quoted for a shell; an output folder not chosen yet (an empty
/// --target_dir) shows as `placeholder`.
QString shownCommandLine(const std::string& command, std::vector<std::string> args, const std::string& placeholder);

/// The workbench's scan of `checkpoint`, for a prepare to reuse instead of reading it again (the workbench's
/// ScanJob applies the default expected-parameter check).
tessera::ScannedCheckpoint loadedScan(const CheckpointPtr& checkpoint);

} // namespace tessera::ui
