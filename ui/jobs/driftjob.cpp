// SPDX-License-Identifier: GPL-3.0-or-later
#include "driftjob.h"

#include "forwardedprogress.h"
#include "latestonlyrunner.h"

#include <QElapsedTimer>

#include <algorithm>
#include <map>
#include <memory>

namespace tessera::ui {

namespace {

/// The report so far with the records given until now laid out as driftRun() lays out its final ones: step by step,
/// each step's tensors in reading order (which is the report's tensor order).
IndexedDrift driftSoFar(const tessera::DriftReport& soFar, const std::vector<tessera::DriftRecord>& records)
{
    tessera::DriftReport report = soFar;
    std::map<long long, std::size_t> position;
    for (std::size_t s = 0; s < report.steps.size(); ++s)
        position[report.steps[s].step] = s;
    report.records = records;
    std::stable_sort(report.records.begin(), report.records.end(),
                     [&](const tessera::DriftRecord& a, const tessera::DriftRecord& b) {
                         return position[a.step] < position[b.step];
                     });
    return IndexedDrift(std::move(report));
}

} // namespace

DriftJob::DriftJob(QObject* parent) : RunnerJob(parent) { }

DriftJob::~DriftJob() = default;

std::function<void(DriftPtr)> DriftJob::partialSender(quint64 generation)
{
    return [this, generation](DriftPtr drift) {
        postIfLatest(generation, [this, drift] { Q_EMIT partial(drift); });
    };
}

void DriftJob::start(const tessera::DriftOptions& options)
{
    const quint64 generation = nextGeneration();
    auto send = progressSender(generation);
    auto sendPartial = partialSender(generation);
    runner()->start(resultWork<IndexedDrift>(
        [options, send, sendPartial, every = m_partialEveryMs](tessera::Progress& runner) -> tessera::Result<IndexedDrift> {
            ForwardedProgress progress(runner, send);
            // The records so far, sent on as a partial report now and then (indexed here, not on the GUI thread).
            std::vector<tessera::DriftRecord> records;
            QElapsedTimer sinceSent;
            sinceSent.start();
            const auto keep = [&](const tessera::DriftReport& soFar, const tessera::DriftRecord& record) {
                records.push_back(record);
                if (sinceSent.elapsed() < every)
                    return;
                sinceSent.restart();
                sendPartial(std::make_shared<const IndexedDrift>(driftSoFar(soFar, records)));
            };
            auto report = tessera::driftRun(options, progress, keep);
            if (!report)
                return report.error();
            return IndexedDrift(std::move(*report));
        },
        [this](const DriftPtr& drift) { Q_EMIT finished(drift); },
        [this](const QString& error) { Q_EMIT failed(error); }));
}

} // namespace tessera::ui
