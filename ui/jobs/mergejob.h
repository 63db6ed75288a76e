// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include "mapping/lora.h"
#include "merge/lora_plan.h"

#include <QFutureWatcher>
#include <QObject>
#include <QThreadPool>

#include <atomic>
#include <memory>

namespace tessera {
struct MergePlan;
struct GgufPlan;
}

namespace tessera::ui {

/// A LoRA checkpoint read and planned: the fused model and/or the adapter, written together.
struct LoraMerge {
    tessera::LoraCheckpoint checkpoint;
    tessera::LoraMergePlans plans;
};

/// Where a running merge is, as the panel shows it.
struct MergeStatus {
    quint64 bytesDone = 0;
    quint64 bytesTotal = 0;
    qint64 tensorsDone = 0;
    qint64 tensorsTotal = 0;
    QString currentTensor;
};

/// The result of a merge on the GUI side: an error message, or what was written.
struct MergeResult {
    bool ok = false;
    bool canceled = false;
    QString message;      ///< error, or a one-line summary
    QStringList warnings;
};

/// Runs tessera::mergeCheckpoint on a worker thread. Progress comes from the engine's worker threads, is
/// throttled to ~10 updates a second and delivered on the GUI thread; Cancel sets the engine's cancel flag, and
/// the engine leaves nothing behind. The destructor cancels and waits.
class MergeJob : public QObject {
    Q_OBJECT
public:
    explicit MergeJob(QObject* parent = nullptr);
    ~MergeJob() override;

    /// `verifyReplicas`: compare every replica with the piece written (--verify-replicas). With `lora`, its
    /// outputs are written (the fused model and the adapter, published together) instead of `plan`.
    void start(CheckpointPtr checkpoint, std::shared_ptr<const tessera::MergePlan> plan, const QString& targetDir,
               unsigned threads, bool verifyReplicas = false, std::shared_ptr<const LoraMerge> lora = nullptr);
    /// Writes the GGUF file `plan` describes into `targetDir` (tessera merge --format gguf).
    void startGguf(std::shared_ptr<const tessera::GgufPlan> plan, const QString& targetDir, unsigned threads);
    void cancel();
    bool isRunning() const;

Q_SIGNALS:
    void progress(const tessera::ui::MergeStatus& status);
    void finished(const tessera::ui::MergeResult& result);

private:
    void launch(CheckpointPtr checkpoint, std::shared_ptr<const tessera::MergePlan> plan, const QString& targetDir,
                unsigned threads, bool verifyReplicas, std::shared_ptr<const LoraMerge> lora,
                std::shared_ptr<const tessera::GgufPlan> gguf);
    QThreadPool m_pool;
    QFutureWatcher<MergeResult>* m_watcher = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancel;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::MergeStatus)
Q_DECLARE_METATYPE(tessera::ui::MergeResult)
