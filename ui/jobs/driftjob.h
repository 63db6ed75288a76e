// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "jobs/runnerjob.h"
#include "models/indexeddrift.h"

#include "compare/drift.h"

namespace tessera::ui {

/// Reads a run's drift (tessera::driftRun: every tensor of every saved step) on a worker, progress in bytes; a start
/// supersedes the running one.
class DriftJob : public RunnerJob {
    Q_OBJECT
public:
    explicit DriftJob(QObject* parent = nullptr);
    ~DriftJob() override;

    void start(const tessera::DriftOptions& options);

Q_SIGNALS:
    void finished(const tessera::ui::DriftPtr& drift);
};

} // namespace tessera::ui
