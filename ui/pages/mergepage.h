// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "model/checkpoint.h"
#include "result.h"
#include "jobs/throughputmeter.h"

#include <QTimer>
#include <QWidget>

#include <memory>
#include <optional>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;

namespace tessera {
struct MergePlan;
}

namespace tessera {
struct MergeOptions;
struct GgufPlan;
}

namespace tessera::ui {

class CompareJob;
class MappingJob;
class MergeJob;
class MergePlanModel;
struct LoraMerge;
struct CompareResult;
struct MappingOutcome;
struct MergeResult;

/// The options of `tessera merge` as the panel collects them.
struct MergePanelOptions {
    QString localDir;
    QString targetDir;
    QString backend = QStringLiteral("auto");
    QString hfModelPath;
    QString dtype;          ///< empty: keep the checkpoint's dtype
    QString maxShardSize = QStringLiteral("5GB");
    int threads = 0;
    bool tieWordEmbedding = false;
    bool isValueModel = false;
    bool verifyReplicas = false;
    bool strict = true;
    QString paramMapping;   ///< the rules file, empty for the built-in rules (or unsaved editor rules)
    QString ignoreMissingParams;
    QString lora = QStringLiteral("both"); ///< LoRA checkpoints: fused, adapter or both
    QString loraAlpha;      ///< empty: from the checkpoint's files
    QString baseModel;      ///< an adapter-only checkpoint's base model
    QString format = QStringLiteral("safetensors"); ///< safetensors or gguf
    QString outtype = QStringLiteral("f16");        ///< gguf: a name of formats/gguf_types.h
};

/// The merge panel: the options of `tessera merge` (with the Megatron mapping flags, shared with the Mapping
/// view through one MappingJob), the dry-run plan as a table of files with disk and memory lines, Run and
/// "Test against reference…" on workers with live progress (tensors, bytes, GB/s, ETA, current tensor), Cancel
/// (the engine leaves nothing behind) and a log.
class MergePage : public QWidget {
    Q_OBJECT
public:
    explicit MergePage(QWidget* parent = nullptr);
    ~MergePage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    /// Shares the Mapping view's mapping (the page has its own until then); not owned.
    void setMappingJob(MappingJob* job);
    MappingJob* mappingJob() const { return m_mapping; }
    void setReferenceDir(const QString& dir);
    void setTargetDir(const QString& dir);
    MergePanelOptions options() const;
    /// The dry-run plan as `tessera merge --dry-run` prints it, or why there is none.
    QString planText() const { return m_planText; }
    /// The `tessera merge` command line these options amount to.
    QString commandLine() const;
    MergePlanModel* planModel() const { return m_planModel; }
    bool canRun() const;
    bool canTest() const;
    void run();
    /// Compares the merge with the reference folder (asks for one when none is set).
    void runTest();
    void cancel();
    MergeJob* job() const { return m_job; }
    CompareJob* compareJob() const { return m_compare; }
    /// Shows progress of a running merge.
    void showProgress(int tensorsDone, int tensorsTotal, quint64 bytesDone, quint64 bytesTotal, const QString& current);
    void appendLog(const QString& line);
    QString logText() const;

    /// The model the plan writes and what it is planned from (the checkpoint, or its Hugging Face-named mapping):
    /// what the Split page writes in another layout. Null while there is no plan.
    std::shared_ptr<const tessera::MergePlan> plannedModel() const { return m_mergePlan; }
    /// With the GGUF format chosen: the GGUF file the merge writes instead of the safetensors folder.
    std::shared_ptr<const tessera::GgufPlan> ggufPlan() const { return m_ggufPlan; }
    CheckpointPtr plannedInput() const { return m_mergeInput; }
Q_SIGNALS:
    /// The plan was redone (plannedModel() may be another or none; planText() says why not).
    void planChanged();
    /// "Open in Diff" after a test: compare the merge's checkpoint with `referenceDir` in the Diff view.
    void openInDiffRequested(const QString& referenceDir, double atol, double rtol);

private:
    void updatePlan();
    void pushMappingSettings();
    void syncMappingWidgets();
    void onMappingFinished(const MappingOutcome& outcome);
    void onFinished(const MergeResult& result);
    void onCompareFinished(const CompareResult& result);
    void showPlanError(const QString& message);
    /// Plans the GGUF export of `input` and shows it; false (and the plan box says why) when it cannot be written.
    bool planGguf(const CheckpointPtr& input, const tessera::MergeOptions& options);
    bool isGguf() const;
    void updateButtons();
    void loadRules();
    bool isMegatron() const;
    /// Reads and plans a LoRA checkpoint `input` with the page's LoRA options; false (and the plan box says
    /// why) when it cannot be merged.
    bool planLora(const CheckpointPtr& input, const tessera::MergeOptions& options);

    CheckpointPtr m_checkpoint;
    ThroughputMeter m_meter;
    std::shared_ptr<const tessera::MergePlan> m_mergePlan;
    CheckpointPtr m_mergeInput; ///< what the plan merges: the checkpoint, or its Hugging Face-named mapping
    std::shared_ptr<const LoraMerge> m_loraMerge;
    std::shared_ptr<const tessera::GgufPlan> m_ggufPlan; ///< set when the GGUF format is chosen and plans ///< a LoRA checkpoint's plans (m_mergePlan is the primary one)
    /// --base_model as last scanned: the plan is redone on every option change, the base is read once per path.
    QString m_basePath;
    std::optional<tessera::Result<tessera::CheckpointInfo>> m_baseScan;
    QTimer m_baseDebounce; ///< typing a base model path rescans once the user pauses, not per keystroke
    QString m_planText;
    std::shared_ptr<const tessera::MergePlan> m_announcedPlan; ///< the plan planChanged() last told about
    MergeJob* m_job;
    CompareJob* m_compare;
    MappingJob* m_ownMapping;
    MappingJob* m_mapping = nullptr; ///< m_ownMapping or the Mapping view's, which outlives the use
    QTimer m_mappingDebounce;
    MergePlanModel* m_planModel;
    QLineEdit* m_localDir;
    QLineEdit* m_targetDir;
    QComboBox* m_backend;
    QLineEdit* m_hfModelPath;
    QComboBox* m_dtype;
    QComboBox* m_format;
    QComboBox* m_outtype;
    QLineEdit* m_maxShardSize;
    QSpinBox* m_threads;
    QLineEdit* m_paramMapping;
    QPushButton* m_loadRules;
    QLineEdit* m_ignoreMissing;
    QCheckBox* m_strict;
    QCheckBox* m_tie;
    QCheckBox* m_valueModel;
    QCheckBox* m_verifyReplicas;
    QComboBox* m_lora;
    QLineEdit* m_loraAlpha;
    QLineEdit* m_baseModel;
    QLineEdit* m_reference;
    QLineEdit* m_atol;
    QLineEdit* m_rtol;
    QPushButton* m_openInDiff;
    QLabel* m_command;
    QLabel* m_planSummary;
    QTableView* m_planView;
    QPushButton* m_run;
    QPushButton* m_test;
    QPushButton* m_cancel;
    QProgressBar* m_progress;
    QLabel* m_progressText;
    QLabel* m_current;
    QPlainTextEdit* m_log;
};

} // namespace tessera::ui
