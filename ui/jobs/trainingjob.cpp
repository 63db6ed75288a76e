// SPDX-License-Identifier: GPL-3.0-or-later
#include "trainingjob.h"

#include "forwardedprogress.h"
#include "latestonlyrunner.h"

namespace tessera::ui {

TrainingJob::TrainingJob(QObject* parent) : RunnerJob(parent) { }

TrainingJob::~TrainingJob() = default;

void TrainingJob::readState(CheckpointPtr checkpoint)
{
    const quint64 generation = nextGeneration();
    runner()->start(resultWork<tessera::TrainingState>(
        [checkpoint](tessera::Progress& progress) {
            return checkpoint ? tessera::readTrainingState(*checkpoint, 0, progress)
                              : tessera::Result<tessera::TrainingState>(tessera::TrainingState {});
        },
        [this, generation](const TrainingStatePtr& state) {
            if (isLatest(generation))
                Q_EMIT stateRead(state);
        },
        [this](const QString& error) { Q_EMIT failed(error); }));
}

void TrainingJob::computeNorms(TrainingStatePtr state)
{
    auto send = progressSender(nextGeneration());
    runner()->start(resultWork<tessera::TrainingNorms>(
        [state, send](tessera::Progress& runner) {
            ForwardedProgress progress(runner, send);
            return tessera::computeTrainingNorms(*state, 0, progress);
        },
        [this](const TrainingNormsPtr& norms) { Q_EMIT normsComputed(norms); },
        [this](const QString& error) { Q_EMIT failed(error); }));
}

} // namespace tessera::ui
