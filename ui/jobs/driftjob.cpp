// SPDX-License-Identifier: GPL-3.0-or-later
#include "driftjob.h"

#include "forwardedprogress.h"
#include "latestonlyrunner.h"

namespace tessera::ui {

DriftJob::DriftJob(QObject* parent) : RunnerJob(parent) { }

DriftJob::~DriftJob() = default;

void DriftJob::start(const tessera::DriftOptions& options)
{
    auto send = progressSender(nextGeneration());
    runner()->start(resultWork<IndexedDrift>(
        [options, send](tessera::Progress& runner) -> tessera::Result<IndexedDrift> {
            ForwardedProgress progress(runner, send);
            auto report = tessera::driftRun(options, progress);
            if (!report)
                return report.error();
            return IndexedDrift(std::move(*report)); // indexed here, not on the GUI thread
        },
        [this](const DriftPtr& drift) { Q_EMIT finished(drift); },
        [this](const QString& error) { Q_EMIT failed(error); }));
}

} // namespace tessera::ui
