// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include "compare/tensor_diff.h"

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QThreadPool>
#include <QVector>

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

namespace tessera::ui {

using DiffReportPtr = std::shared_ptr<const tessera::DiffReport>;
/// Finished rows streamed from the worker: (row index in the report, the row).
using DiffRowBatch = std::vector<std::pair<std::size_t, tessera::TensorDiff>>;

/// What a diff run produces.
struct DiffOutcome {
    DiffReportPtr report;
    QString error;
    bool canceled = false;
};

/// Runs tessera::diffCheckpoints on a worker: scans the reference B, maps Megatron names of either side, pairs the
/// tensors (published at once as pending rows), then streams finished rows in batches (at most ten a second) and
/// finally the whole report. Each start() supersedes the previous run: a generation counter drops anything a
/// superseded run still delivers. The destructor cancels and waits, so no worker outlives the job.
class DiffJob : public QObject {
    Q_OBJECT
public:
    explicit DiffJob(QObject* parent = nullptr);
    ~DiffJob() override;

    /// Compares `a` with the checkpoint at `referencePath` (any layout). With `pathA` set, A is scanned from
    /// there instead (another checkpoint than the one loaded) and `a` is unused.
    void start(CheckpointPtr a, const QString& referencePath, const tessera::DiffOptions& options,
               const QString& pathA = {});
    /// Compares a LoRA checkpoint's fused model (A) with its own base weights (B): each fused weight's
    /// difference is the update its adapter adds.
    void startLoraUpdate(CheckpointPtr a, const tessera::DiffOptions& options);
    void cancel();
    bool isRunning() const;

Q_SIGNALS:
    void started();
    /// Both sides as compared (Hugging Face names) and every row, pending until its statistics arrive.
    void paired(const tessera::ui::CheckpointPtr& a, const tessera::ui::CheckpointPtr& b,
                const std::vector<tessera::TensorDiff>& rows);
    void rowsFinished(const tessera::ui::DiffRowBatch& rows);
    void progress(int permille, const QString& text);
    void finished(const tessera::ui::DiffReportPtr& report);
    void failed(const QString& message);
    void canceled();

private:
    void onFinished(quint64 generation);
    void run(CheckpointPtr a, const QString& pathA, const QString& referencePath, const tessera::DiffOptions& options,
             bool loraUpdate);

    QThreadPool m_pool;
    QFutureWatcher<DiffOutcome>* m_watcher = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancel;
    quint64 m_generation = 0;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::DiffReportPtr)
