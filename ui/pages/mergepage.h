// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "jobs/throughputmeter.h"

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace tessera::ui {

/// The options of `tessera merge` as the panel collects them (Qt types; converted to the engine's request at
/// the boundary once core/merge_engine.h exists).
struct MergeOptions {
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
/// scan and Run is disabled with a note. The progress widgets are wired to ThroughputMeter already.
class MergePage : public QWidget {
    Q_OBJECT
public:
    explicit MergePage(QWidget* parent = nullptr);
    ~MergePage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    void setReferenceDir(const QString& dir);
    MergeOptions options() const;
    /// The dry-run plan text shown (an estimate until the engine provides one).
    QString planText() const;
    /// Shows progress of a running merge; called by the merge job once it exists.
    void showProgress(int tensorsDone, int tensorsTotal, quint64 bytesDone, quint64 bytesTotal, const QString& current);
    void appendLog(const QString& line);

private:
    void updatePlan();

    CheckpointPtr m_checkpoint;
    ThroughputMeter m_meter;
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
