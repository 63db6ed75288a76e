// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QTimer>
#include <QWidget>

#include <memory>

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
struct SplitPlan;
}

namespace tessera::ui {

class PlacementView;
class SplitJob;
class SplitPlanModel;
struct SplitResult;

/// The split panel, beside Merge: the model the Merge page plans (the checkpoint's tensors under Hugging Face
/// names, whatever its layout) written as another layout — FSDP2 rank files, a DCP folder, Megatron per-rank
/// folders or torch_dist. Choose the layout and sizes; the plan (files, sizes, memory, disk) and the placement
/// of any tensor across the target ranks are shown before anything is written; Run writes it on a worker with
/// progress and Cancel (nothing is left behind).
class SplitPage : public QWidget {
    Q_OBJECT
public:
    explicit SplitPage(QWidget* parent = nullptr);
    ~SplitPage() override;

    /// The model to split: `model` planned from `input` (null: none, `why` says so). `checkpointRoot` seeds the
    /// target folder's Browse dialog.
    void setModel(CheckpointPtr input, std::shared_ptr<const tessera::MergePlan> model, const QString& checkpointRoot,
                  const QString& why = {});

    void setFormat(const QString& name); ///< "fsdp", "dcp", "megatron", "megatron-dist"
    void setWorldSize(int ranks);
    void setMesh(const QString& mesh, const QString& dimNames = {});
    void setMegatronSizes(int tp, int pp, int vpp = 1, int ep = 1);
    void setTargetDir(const QString& dir);
    /// Draws the planned placement of model tensor `index` (by the model's order).
    void previewTensor(int index);
    /// Draws the model tensor called `name`, if the model has one (the tree's selection follows here).
    void previewTensorNamed(const QString& name);

    const tessera::SplitPlan* plan() const { return m_plan.get(); }
    SplitPlanModel* planModel() const { return m_planModel; }
    PlacementView* preview() const { return m_preview; }
    /// The plan as `tessera split --dry-run` prints it, or why there is none.
    QString planText() const { return m_planText; }
    /// The `tessera split` command line these options amount to.
    QString commandLine() const;
    bool canRun() const;
    void run();
    void cancel();
    SplitJob* job() const { return m_job; }
    QString logText() const;

private:
    void schedulePlan();
    void updatePlan();
    void updateFormatRows();
    void updateButtons();
    void onFinished(const SplitResult& result);
    void appendLog(const QString& line);
    QString formatName() const;

    CheckpointPtr m_input;
    std::shared_ptr<const tessera::MergePlan> m_model;
    std::shared_ptr<const tessera::SplitPlan> m_plan;
    CheckpointPtr m_previewInfo; ///< the plan in the model's names, for the placement drawing
    QString m_checkpointRoot;
    QString m_why;
    QString m_planText;
    QTimer m_planDebounce;

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
    QWidget* m_fsdpRows;
    QWidget* m_megatronRows;
    QWidget* m_stageRows = nullptr;
    QLabel* m_planSummary;
    QTableView* m_planView;
    QComboBox* m_previewTensor;
    PlacementView* m_preview;
    QLabel* m_previewHover;
    QLineEdit* m_command;
    QPushButton* m_run;
    QPushButton* m_cancel;
    QProgressBar* m_progress;
    QLabel* m_progressText;
    QPlainTextEdit* m_log;
};

} // namespace tessera::ui
