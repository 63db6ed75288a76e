// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include "compare/tensor_diff.h"
#include "ops/diff_request.h"
#include "ops/prepare_model.h"

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QStringList>
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

/// Runs a diff request on a worker as `tessera diff` runs it (tessera::prepareDiff(): both sides read, checked and
/// named as a merge names them, then runPreparedDiff()): pairs the tensors (published at once as pending rows, with
/// what the sides' scans and mappings found), then streams finished rows in batches (at most ten a second) and
/// finally the whole report. Each start() supersedes the previous run: a generation counter drops anything a
/// superseded run still delivers. The destructor cancels and waits, so no worker outlives the job.
class DiffJob : public QObject {
    Q_OBJECT
public:
    explicit DiffJob(QObject* parent = nullptr);
    ~DiffJob() override;

    /// Prepares and runs `request`; `context` brings the scans already made (the loaded checkpoint).
    void start(const tessera::DiffRequest& request, tessera::PrepareContext context);
    void cancel();
    /// From start() until its result is handled on the GUI thread (a finished worker's result may still be queued).
    bool isRunning() const;

Q_SIGNALS:
    void started();
    /// Both sides as compared (Hugging Face names), every row (pending until its statistics arrive), what the
    /// sides' scans and mappings found ("A: …") and whether they are different models (empty when not).
    void paired(const tessera::ui::CheckpointPtr& a, const tessera::ui::CheckpointPtr& b,
                const std::vector<tessera::TensorDiff>& rows, const QStringList& warnings, const QString& models);
    void rowsFinished(const tessera::ui::DiffRowBatch& rows);
    void progress(int permille, const QString& text);
    void finished(const tessera::ui::DiffReportPtr& report);
    void failed(const QString& message);
    void canceled();

private:
    void onFinished(quint64 generation);

    QThreadPool m_pool;
    QFutureWatcher<DiffOutcome>* m_watcher = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancel;
    quint64 m_generation = 0;
};

} // namespace tessera::ui

Q_DECLARE_METATYPE(tessera::ui::DiffReportPtr)
