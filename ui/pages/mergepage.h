// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "jobs/throughputmeter.h"

#include <memory>

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace tessera {
struct MergePlan;
}

namespace tessera::ui {

class MergeJob;
struct MergeResult;

/// The options of `tessera merge` as the panel collects them (Qt types; converted to the engine's request at
/// the boundary once core/merge_engine.h exists).
struct MergePanelOptions {
    QString localDir;
    QString targetDir;
    QString backend = QStringLiteral("auto");
    QString hfModelPath;
    QString dtype;          ///< empty: keep the checkpoint's dtype
    QString maxShardSize = QStringLiteral("5GB");
    int threads = 0;
};

/// The merge panel: options, the dry-run plan, Run/Cancel, live progress (tensors, bytes, GB/s, ETA, current
/// tensor) and a log. The merge engine is being built in the core; until it is, the plan is an estimate from the
/// The plan comes from the core's planMerge() (the same as `tessera merge --dry-run`); Run starts a MergeJob.
class MergePage : public QWidget {
    Q_OBJECT
public:
    explicit MergePage(QWidget* parent = nullptr);
    ~MergePage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    void setReferenceDir(const QString& dir);
    MergePanelOptions options() const;
    /// The dry-run plan text shown.
    QString planText() const;
    bool canRun() const;
    void run();
    MergeJob* job() const { return m_job; }
    /// Shows progress of a running merge.
    void showProgress(int tensorsDone, int tensorsTotal, quint64 bytesDone, quint64 bytesTotal, const QString& current);
    void appendLog(const QString& line);

private:
    void updatePlan();
    void onFinished(const MergeResult& result);
    void updateButtons();

    CheckpointPtr m_checkpoint;
    ThroughputMeter m_meter;
    std::shared_ptr<const tessera::MergePlan> m_mergePlan;
    MergeJob* m_job;
    QLineEdit* m_localDir;
    QLineEdit* m_targetDir;
    QComboBox* m_backend;
    QLineEdit* m_hfModelPath;
    QComboBox* m_dtype;
    QLineEdit* m_maxShardSize;
    QSpinBox* m_threads;
    QLineEdit* m_reference;
    QPlainTextEdit* m_plan;
    QPushButton* m_run;
    QPushButton* m_cancel;
    QProgressBar* m_progress;
    QLabel* m_progressText;
    QLabel* m_current;
    QPlainTextEdit* m_log;
};

} // namespace tessera::ui
