// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "models/trainingnormsmodel.h"

#include "formats/training_state.h"

#include <QObject>
#include <QString>

#include <memory>

namespace tessera::ui {

class LatestOnlyRunner;

using TrainingStatePtr = std::shared_ptr<const tessera::TrainingState>;

/// Reads a checkpoint's training state (tessera::readTrainingState: pickles only) and, when asked, its optimizer
/// norms (tessera::computeTrainingNorms: every moment tensor) on a worker, one run at a time: starting either
/// supersedes the running one. Progress is throttled at the source; the destructor cancels and waits.
class TrainingJob : public QObject {
    Q_OBJECT
public:
    explicit TrainingJob(QObject* parent = nullptr);
    ~TrainingJob() override;

    void readState(CheckpointPtr checkpoint);
    void computeNorms(TrainingStatePtr state);
    /// Stops the running read; canceled() says so when one was running.
    void cancel();
    bool isRunning() const;

Q_SIGNALS:
    /// The checkpoint's training state (empty when it has none, as for every layout but verl FSDP).
    void stateRead(const tessera::ui::TrainingStatePtr& state);
    void normsComputed(const tessera::ui::TrainingNormsPtr& norms);
    void progress(quint64 done, quint64 total, const QString& text);
    void failed(const QString& message);
    void canceled();

private:
    LatestOnlyRunner* m_runner;
    quint64 m_generation = 0;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::TrainingStatePtr)
Q_DECLARE_METATYPE(tessera::ui::TrainingNormsPtr)
