// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "jobs/throughputmeter.h"

#include "ops/merge_request.h"
#include "ops/prepare_model.h"
#include "ops/diff_request.h"
#include "ops/test_request.h"

#include <QTimer>
#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

class QCheckBox;
class QComboBox;
class QGridLayout;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;

namespace tessera {
struct MergePlan;
struct GgufPlan;
struct PreparedMerge;
}

namespace tessera::ui {

class CompareJob;
class MappingJob;
class MergeJob;
class MergePlanModel;
class PlanJob;
struct CompareResult;
struct MergeResult;

/// The merge panel: the options of `tessera merge` as a MergeRequest (with the Megatron mapping flags, shared with
/// the Mapping view through one MappingJob), its plan prepared on a worker by the same prepareMerge() the command
/// line runs (a table of files with disk and memory lines, and what the merge would refuse), Merge — which runs
/// exactly the plan on screen — and "Test against reference…" on workers with live progress (tensors, bytes, GB/s,
/// ETA, current tensor), Cancel (the engine leaves nothing behind) and a log.
class MergePage : public QWidget {
    Q_OBJECT
public:
    explicit MergePage(QWidget* parent = nullptr);
    ~MergePage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    /// Shares the Mapping view's mapping settings (the page has its own until then); not owned.
    void setMappingJob(MappingJob* job);
    MappingJob* mappingJob() const { return m_mapping; }
    void setReferenceDir(const QString& dir);
    void setTargetDir(const QString& dir);

    /// The `tessera merge` request the options make.
    tessera::MergeRequest request() const;
    /// Its model flags: what the Split page writes in another layout.
    tessera::ModelRequest modelRequest() const { return request(); }
    /// The `tessera test` request of Test against reference.
    tessera::TestRequest testRequest() const;
    /// What prepares of this page's requests reuse: the loaded checkpoint and the scans earlier prepares made, and
    /// the Mapping view editor's rules.
    tessera::PrepareContext prepareContext() const;
    /// The `tessera merge` command line of request() (`DIR` until an output folder is chosen).
    QString commandLine() const;

    /// The plan on screen, as `tessera merge --dry-run` prints it, or why there is none.
    QString planText() const { return m_planText; }
    MergePlanModel* planModel() const { return m_planModel; }
    /// The prepared merge on screen; null before the first plan.
    std::shared_ptr<const tessera::PreparedMerge> prepared() const { return m_prepared; }
    /// The plan on screen is being recomputed (the options changed).
    bool isPlanning() const;
    bool canRun() const;
    bool canTest() const;
    void run();
    /// Compares the merge with the reference folder (asks for one when none is set).
    void runTest();
    void cancel();
    MergeJob* job() const { return m_job; }
    /// The folder the last merge wrote, while its options are on screen (what Open Output opens); empty otherwise.
    QString writtenDir() const { return m_writtenDir; }
    CompareJob* compareJob() const { return m_compare; }
    /// Shows progress of a running merge.
    void showProgress(int tensorsDone, int tensorsTotal, quint64 bytesDone, quint64 bytesTotal, const QString& current);
    void appendLog(const QString& line);
    QString logText() const;
    /// The always-visible status line under the buttons.
    QString statusText() const;

    /// The model the plan writes (the primary one of a LoRA merge) and what it is planned from. Null while there is
    /// no plan.
    std::shared_ptr<const tessera::MergePlan> plannedModel() const;
    CheckpointPtr plannedInput() const;
    /// With the GGUF format chosen: the GGUF file the merge writes instead of the safetensors folder.
    std::shared_ptr<const tessera::GgufPlan> ggufPlan() const;

Q_SIGNALS:
    /// A new plan is on screen (plannedModel() may be another or none; planText() says why not).
    void planChanged();
    /// The model flags changed: modelRequest() and prepareContext() say what the Split page writes.
    void modelRequestChanged();
    /// "Open in Diff" after a test: the diff of the test just run (its checkpoint, reference, tolerances and LoRA
    /// flags), so the Diff view gives the test's answer tensor by tensor.
    void openInDiffRequested(const tessera::DiffRequest& request);

private:
    void createWidgets();
    void createOutTypeChoice();
    void selectDefaultOutType();
    /// Each GGUF type's item with the size its file would have, from the last GGUF plan of these options (kept when
    /// only the type changes; "…" while other options are planned).
    void showTypeSizes();
    QGroupBox* buildOptions();
    void buildLayout(QGroupBox* options);
    void connectOptions();
    void connectJobs();
    void resetOptions();
    void requestChanged();
    void schedulePlan(int delayMs);
    void onPrepared(const std::shared_ptr<const tessera::PreparedMerge>& prepared);
    void showPlan();
    void pushMappingSettings();
    void syncMappingWidgets();
    void onFinished(const MergeResult& result);
    void onCompareFinished(const CompareResult& result);
    void showPlanError(const QString& message);
    bool isGguf() const;
    void updateButtons();
    void loadRules();
    bool isMegatron() const;
    bool confirmReplacing();
    void setWrittenDir(const QString& dir);

    CheckpointPtr m_checkpoint;
    bool m_loraCheckpoint = false;
    ThroughputMeter m_meter;
    std::shared_ptr<const tessera::PreparedMerge> m_prepared;
    /// The file size of each GGUF type, from the last GGUF plan, and that plan's request without its --outtype: the
    /// options the sizes hold for.
    std::vector<std::pair<tessera::GgufOutType, std::uint64_t>> m_typeSizes;
    std::optional<tessera::MergeRequest> m_typeSizesOf;
    /// The loaded checkpoint and what earlier prepares read (a rescan with other options, a base model), reused.
    std::vector<tessera::ScannedCheckpoint> m_scans;
    QString m_planText;
    QString m_outcome; ///< how the last run or test ended: the status line says so until the options change
    PlanJob* m_planner;
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
    QPushButton* m_openOutput; ///< the folder the last merge wrote, until the options change
    QString m_writtenDir;
    tessera::TestRequest m_tested; ///< the test last started: what Open in Diff shows
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
