// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "jobs/runnerjob.h"
#include "models/indexeddrift.h"

#include "compare/drift.h"

namespace tessera::ui {

/// Reads a run's drift (tessera::driftRun: every tensor of every saved step) on a worker, progress in bytes; a start
/// supersedes the running one. While it reads, partial() sends what was read so far a few times a second (every
/// step and tensor, the records read until then), so the page fills as the read goes on.
class DriftJob : public RunnerJob {
    Q_OBJECT
public:
    explicit DriftJob(QObject* parent = nullptr);
    ~DriftJob() override;

    void start(const tessera::DriftOptions& options);
    /// How often a read sends partial() (from the next start on); tests set 0: after every record.
    void setPartialInterval(int milliseconds) { m_partialEveryMs = milliseconds; }

Q_SIGNALS:
    void partial(const tessera::ui::DriftPtr& drift);
    void finished(const tessera::ui::DriftPtr& drift);

private:
    /// How run `generation` queues its partial reports to partial() (dropped once superseded or canceled).
    std::function<void(DriftPtr)> partialSender(quint64 generation);

    /// Often enough for the heatmap to fill as the read goes, seldom enough that indexing the copies costs the read
    /// nothing worth measuring.
    int m_partialEveryMs = 300;
};

} // namespace tessera::ui
