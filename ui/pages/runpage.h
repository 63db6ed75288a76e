// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "models/indexeddrift.h"

#include "formats/run_steps.h"
#include "ops/diff_request.h"
#include "ops/drift_request.h"

#include <QWidget>

#include <optional>
#include <vector>

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSlider;
class QSortFilterProxyModel;
class QStackedWidget;
class QTableView;
class QToolButton;

namespace tessera::ui {

class ColumnFitter;
class DriftGridModel;
class DriftHeatmap;
class DriftJob;
class DriftTableModel;
class DriftTrendPlot;
class TensorNameDelegate;

/// `tessera drift` in the workbench: opened on a run root (the folder of a run's global_step_N, iter_N or step-N
/// folders), it reads every tensor of every saved step on a worker (with progress and Cancel; at once for a small
/// run) and shows how each moved from one step to the next: a heatmap of the relative change with layers down and
/// modules across, one step at a time (the slider), NaN and Inf in red; a tensor's norm and change over all steps;
/// and the table of every tensor at every step. Clicking a heatmap cell (or double-clicking a table cell) opens the
/// Diff of that tensor between the two steps. Export saves the table as CSV or JSON and the plots as PNG, SVG or
/// PDF. A single checkpoint has no steps to compare: the page says so, and offers the run root when one holds it.
class RunPage : public QWidget {
    Q_OBJECT
public:
    explicit RunPage(QWidget* parent = nullptr);
    ~RunPage() override;

    /// The folder the workbench opened (`path`) and its scan: the run's steps are looked for there.
    void setRun(const QString& path, CheckpointPtr checkpoint);
    /// The run's saved steps (fewer than two: not a run to compare).
    const std::vector<tessera::RunStep>& steps() const { return m_steps; }
    bool isRun() const { return m_steps.size() >= 2; }
    /// The `tessera drift` request Compute Drift runs, and its command line as the page shows it.
    tessera::DriftRequest request() const;
    QString commandLine() const;
    /// Starts reading the run; false (with a message) when there is no run to read.
    bool computeDrift();
    void cancel();
    bool isBusy() const;
    /// Shows step index `step` (into the report's steps) in the heatmap.
    void showStep(int step);
    /// Selects `tensor`'s row (its norm and change are plotted); false when the run has no such tensor.
    bool selectTensor(const QString& tensor);
    /// The Diff of `tensor` between the step it is compared with and step index `step`: the two steps' folders as
    /// A and B; none for a step with nothing before it.
    std::optional<tessera::DiffRequest> diffRequest(const QString& tensor, int step) const;
    /// Asks for diffRequest() to be opened (diffRequested); false when there is nothing to compare.
    bool openDiff(const QString& tensor, int step);
    /// Writes the table to `path`: CSV when it ends in .csv, else the JSON `tessera drift --json` prints. False with
    /// `error` set when nothing was read yet or the file cannot be written.
    bool exportTable(const QString& path, QString* error) const;

    const DriftPtr& drift() const { return m_drift; }
    DriftTableModel* tableModel() const { return m_table; }
    DriftGridModel* gridModel() const { return m_grid; }
    DriftHeatmap* heatmap() const { return m_heatmap; }
    DriftTrendPlot* trendPlot() const { return m_trend; }
    QTableView* tableView() const { return m_view; }
    QSlider* stepSlider() const { return m_slider; }
    QPushButton* computeButton() const { return m_compute; }
    DriftJob* job() const { return m_job; }
    QString statusText() const;
    /// The message shown instead of the run (a single checkpoint, an error), empty when the run is shown.
    QString messageText() const;

    /// Runs whose steps take no more bytes than this (as the loaded step's size says) are read as soon as they
    /// are opened.
    static constexpr std::uint64_t kAutomaticDriftBytes = 1ull << 30;

Q_SIGNALS:
    /// The run's drift is on screen.
    void driftShown();
    void diffRequested(const tessera::DiffRequest& request, const QString& tensor);
    /// The run root holding the single checkpoint that was opened, to be opened instead.
    void openPathRequested(const QString& path);

private:
    void createWidgets();
    void buildLayout();
    void connectSignals();
    void findSteps();
    void showMessage(const QString& html, const QString& runRoot = {});
    void onPartial(const DriftPtr& drift);
    void onFinished(const DriftPtr& drift);
    void onFailed(const QString& message);
    void onCellClicked(const QModelIndex& index);
    void onCurrentRowChanged();
    void setRunning(bool running);
    void exportTableWithDialog(const QString& suffix);
    void showSummary();
    /// The run root above a single step's folder (its parent, or its grandparent for verl's role folder), empty
    /// when neither holds several steps.
    QString enclosingRun() const;

    QString m_path;
    CheckpointPtr m_checkpoint;
    std::vector<tessera::RunStep> m_steps;
    DriftPtr m_drift;
    bool m_reading = false;    ///< from Compute Drift until the whole run (or an error, or Cancel) arrives
    bool m_stepPicked = false; ///< the user moved the slider while the run was read: the final report keeps that step
    DriftJob* m_job;
    DriftTableModel* m_table;
    DriftGridModel* m_grid;
    QSortFilterProxyModel* m_proxy;
    QStackedWidget* m_stack;
    QLabel* m_message;
    QPushButton* m_openRun;
    QString m_runAbove; ///< the run root m_openRun opens
    QLabel* m_command;
    QComboBox* m_role;
    QLineEdit* m_stepsField; ///< --steps: which saved steps to read
    QPushButton* m_compute;
    QProgressBar* m_progress;
    QToolButton* m_cancel;
    QPushButton* m_export;
    QLabel* m_status;
    DriftHeatmap* m_heatmap;
    QSlider* m_slider;
    QLabel* m_stepLabel;
    DriftTrendPlot* m_trend;
    QTableView* m_view;
    TensorNameDelegate* m_names;
    ColumnFitter* m_nameColumn = nullptr; ///< never narrower than the names' kept parts; the steps scroll beside it
};

} // namespace tessera::ui
