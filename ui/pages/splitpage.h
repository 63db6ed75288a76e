// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include "ops/model_request.h"
#include "ops/prepare_model.h"
#include "ops/split_request.h"

#include <QWidget>

#include <memory>
#include <vector>

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
struct PreparedSplit;
struct SplitPlan;
}

namespace tessera::ui {

class PlacementView;
class PlanJob;
class SplitJob;
class SplitPlanModel;
struct SplitResult;

/// The split panel, beside Merge: the model the Merge page's flags make (the checkpoint's tensors under Hugging Face
/// names, whatever its layout) written as another layout — FSDP2 rank files, a DCP folder, Megatron per-rank folders
/// or torch_dist. Choose the layout and sizes: the page's SplitRequest is prepared on a worker by the prepareSplit()
/// `tessera split` runs, and the plan (files, sizes, memory, disk, what the split would refuse) and the placement of
/// any tensor across the target ranks are shown before anything is written; Split writes exactly that plan on a
/// worker with progress and Cancel (nothing is left behind).
class SplitPage : public QWidget {
    Q_OBJECT
public:
    explicit SplitPage(QWidget* parent = nullptr);
    ~SplitPage() override;

    /// The model to split: what `model` (the Merge page's flags) reads from `checkpoint`, the loaded checkpoint;
    /// `context` brings the scans already made and the Mapping view's rules.
    void setSource(const tessera::ModelRequest& model, const tessera::PrepareContext& context, CheckpointPtr checkpoint);
    /// The model a merge of `checkpoint` with the default flags writes.
    void setCheckpoint(CheckpointPtr checkpoint);

    void setFormat(const QString& name); ///< "fsdp", "dcp", "megatron", "megatron-dist"
    /// --model_only: leave a run's training state behind.
    void setModelOnly(bool on);
    void setWorldSize(int ranks);
    void setMesh(const QString& mesh, const QString& dimNames = {});
    void setMegatronSizes(int tp, int pp, int vpp = 1, int ep = 1);
    void setTargetDir(const QString& dir);
    /// Draws the planned placement of model tensor `index` (by the model's order).
    void previewTensor(int index);
    /// Draws the model tensor called `name`, if the model has one (the tree's selection follows here).
    void previewTensorNamed(const QString& name);

    /// The `tessera split` request the options make.
    tessera::SplitRequest request() const;
    /// The prepared split on screen; null before the first plan.
    std::shared_ptr<const tessera::PreparedSplit> prepared() const { return m_prepared; }
    /// Its layout plan; null while there is none.
    const tessera::SplitPlan* plan() const;
    SplitPlanModel* planModel() const { return m_planModel; }
    PlacementView* preview() const { return m_preview; }
    /// The plan as `tessera split --dry-run` prints it, or why there is none.
    QString planText() const { return m_planText; }
    /// The `tessera split` command line of request() (`OUT` until an output folder is chosen).
    QString commandLine() const;
    /// The plan on screen is being recomputed (the options changed).
    bool isPlanning() const;
    bool canRun() const;
    void run();
    void cancel();
    SplitJob* job() const { return m_job; }
    /// The folder the last split wrote, while its options are on screen (what Open Output opens); empty otherwise.
    QString writtenDir() const { return m_writtenDir; }
    QString logText() const;
    QString statusText() const;

private:
    void createWidgets();
    void buildLayout();
    void connectSignals();
    void requestChanged();
    void schedulePlan(int delayMs);
    void onPrepared(const std::shared_ptr<const tessera::PreparedSplit>& prepared, CheckpointPtr preview,
                    const std::vector<std::size_t>& order);
    void showPlan();
    void showError(const QString& message);
    void syncWorldSizeToMesh();
    void updateFormatRows();
    void updateButtons();
    void onFinished(const SplitResult& result);
    void appendLog(const QString& line);
    void setWrittenDir(const QString& dir);
    bool confirmOtherFiles();
    void showCommandLine();
    QString formatName() const;

    tessera::ModelRequest m_model;
    tessera::PrepareContext m_context;
    CheckpointPtr m_checkpoint;
    std::shared_ptr<const tessera::PreparedSplit> m_prepared;
    CheckpointPtr m_previewInfo; ///< the plan in the model's names, for the placement drawing
    QString m_wantedPreview;     ///< the tensor last chosen to draw, kept across plans
    QString m_planText;
    QString m_outcome; ///< how the last split ended, shown until the options change

    PlanJob* m_planner;
    SplitJob* m_job;
    SplitPlanModel* m_planModel;
    QLabel* m_source;
    QComboBox* m_format;
    QSpinBox* m_worldSize;
    QLineEdit* m_mesh;
    QLineEdit* m_meshNames;
    QSpinBox* m_tp;
    QSpinBox* m_pp;
    QSpinBox* m_vpp;
    QSpinBox* m_ep;
    QSpinBox* m_firstStageLayers; ///< uneven pipeline stages; the minimum (-1) shows "even"
    QSpinBox* m_lastStageLayers;
    QSpinBox* m_vocabDivisible;
    QLineEdit* m_targetDir;
    QCheckBox* m_modelOnly; ///< --model_only
    QWidget* m_fsdpRows = nullptr;
    QWidget* m_megatronRows = nullptr;
    QWidget* m_stageRows = nullptr;
    QLabel* m_planSummary;
    QTableView* m_planView;
    QComboBox* m_previewTensor;
    PlacementView* m_preview;
    QLabel* m_previewHover;
    QLineEdit* m_command;
    QPushButton* m_run;
    QPushButton* m_cancel;
    QPushButton* m_openOutput; ///< the folder the last split wrote, until the options change
    QString m_writtenDir;
    QProgressBar* m_progress;
    QLabel* m_progressText;
    QPlainTextEdit* m_log;
};

} // namespace tessera::ui
