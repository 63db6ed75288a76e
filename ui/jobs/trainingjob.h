// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "jobs/runnerjob.h"
#include "models/trainingnormsmodel.h"

#include "formats/training_state.h"

#include <QObject>
#include <QString>

#include <memory>

namespace tessera::ui {

using TrainingStatePtr = std::shared_ptr<const tessera::TrainingState>;

/// Reads a checkpoint's training state (tessera::readTrainingState: pickles only) and, when asked, its optimizer
/// norms (tessera::computeTrainingNorms: every moment tensor) on a worker, one run at a time: starting either
/// supersedes the running one.
class TrainingJob : public RunnerJob {
    Q_OBJECT
public:
    explicit TrainingJob(QObject* parent = nullptr);
    ~TrainingJob() override;

    void readState(CheckpointPtr checkpoint);
    void computeNorms(TrainingStatePtr state);

Q_SIGNALS:
    /// The checkpoint's training state (empty when it has none, as for every layout but verl FSDP).
    void stateRead(const tessera::ui::TrainingStatePtr& state);
    void normsComputed(const tessera::ui::TrainingNormsPtr& norms);
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::TrainingStatePtr)
Q_DECLARE_METATYPE(tessera::ui::TrainingNormsPtr)
