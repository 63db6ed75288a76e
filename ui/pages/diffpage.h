// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"
#include "jobs/diffdetailjob.h"
#include "jobs/diffjob.h"

#include "ops/diff_request.h"

#include <QWidget>

#include <string>
#include <vector>

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableView;

namespace tessera::ui {

class ColumnFitter;
class DiffDetailView;
class DiffFilterProxy;
class DiffTableModel;
class FilterBar;
class TensorNameDelegate;

/// Compares the loaded checkpoint (A) with a reference (B, any layout) tensor by tensor, as `tessera diff A B`
/// does: a sortable, filterable table of every tensor streamed in as the worker finishes them, and the detail of the
/// selected tensor (statistics of both sides, histograms, heatmaps, worst elements) computed on demand.
class DiffPage : public QWidget {
    Q_OBJECT
public:
    explicit DiffPage(QWidget* parent = nullptr);
    ~DiffPage() override;

    void setCheckpoint(CheckpointPtr checkpoint);
    void setReferenceDir(const QString& dir);
    QString referenceDir() const;
    /// A's folder as typed: the loaded checkpoint's unless the user chose another.
    QString pathA() const;
    void setPathA(const QString& path);
    /// The `tessera diff` request Compare (or, with `loraUpdate`, LoRA update) makes of the options.
    tessera::DiffRequest request(bool loraUpdate = false) const;
    /// Its command line, as the page shows it.
    QString commandLine(bool loraUpdate = false) const;
    /// What the sides' scans and mappings found, as `tessera diff` prints it.
    const std::vector<std::string>& warnings() const { return m_warningTexts; }
    /// The config.json verdict shown above the table ("A and B are different models: …"), empty when none.
    QString modelsText() const;
    void setTolerances(double atol, double rtol);

    /// Starts the comparison of the loaded checkpoint with the reference; false (with a message shown) when either
    /// is missing or a tolerance is not a number.
    bool compare();
    /// For a LoRA checkpoint: compares its fused model with its base weights, so every fused weight shows the
    /// update its adapter adds; false (with a message) for other checkpoints.
    bool compareLoraUpdate();
    /// Shows `request` on the page and runs it: A, B, the tolerances, and the flags the page has no field for (the
    /// LoRA flags, A's config folder, threads), kept and shown in the command line until another A is chosen. The
    /// Merge page's "Open in Diff" runs its test's diff so. A `focusTensor` is the row selected when the comparison
    /// is done (the Run page's heatmap cell), instead of the largest difference.
    bool compareRequest(const tessera::DiffRequest& request, const QString& focusTensor = {});
    void cancel();
    bool isRunning() const;
    /// Selects the row of `tensor` (shows its detail); false when the table has no such row.
    bool selectTensor(const QString& tensor);

    DiffTableModel* model() const { return m_model; }
    DiffFilterProxy* proxy() const { return m_proxy; }
    QTableView* tableView() const { return m_table; }
    DiffDetailView* detailView() const { return m_detail; }
    DiffReportPtr report() const { return m_report; }
    /// Writes the finished comparison to `path`: CSV when it ends in .csv, else the JSON `tessera diff --json`
    /// prints. False with `error` set when there is no comparison yet or the file cannot be written.
    bool exportReport(const QString& path, QString* error) const;
    /// Asks where, then exportReport().
    void exportWithDialog();
    QString summaryText() const;

Q_SIGNALS:
    void comparisonFinished(const tessera::ui::DiffReportPtr& report);
    void comparisonFailed(const QString& message);
    /// The detail of `tensor` is on screen (or its error is).
    void detailShown(const QString& tensor);

private:
    /// A's folder when it is not the loaded checkpoint (then the job scans it), else empty.
    QString otherA() const;
    void browseReference();
    void createWidgets();
    void configureTable();
    /// The name column fitted to `rows`: their shared prefix dropped first, wide enough for every kept part.
    void fitNames(const std::vector<tessera::TensorDiff>& rows);
    void buildLayout();
    void connectSignals();
    void onPaired(const CheckpointPtr& a, const CheckpointPtr& b, const std::vector<tessera::TensorDiff>& rows,
                  const QStringList& warnings, const QString& models);
    void onFinished(const DiffReportPtr& report);
    void onFailed(const QString& message);
    /// The summary of a LoRA update: how many weights the adapter changed, not a pass or a fail.
    void showUpdateSummary(const tessera::DiffReport& report, double maxAbs);
    void onCurrentRowChanged();
    void selectMostInteresting();
    void setRunning(bool running);
    bool startComparison(bool loraUpdate);

    CheckpointPtr m_checkpoint;
    CheckpointPtr m_sideA;  ///< A and B as compared (Megatron names mapped), for the detail computations
    CheckpointPtr m_sideB;
    DiffReportPtr m_report;
    tessera::DiffOptions m_options;
    tessera::DiffRequest m_carried; ///< flags of compareRequest() the page has no field for
    QString m_nextFocus; ///< compareRequest()'s tensor, for the comparison it starts
    QString m_focus;     ///< the row the running (or last) comparison selects when done; empty: the most interesting
    std::vector<std::string> m_warningTexts; ///< its sides' problems and mapping warnings
    bool m_loraCheckpoint = false;
    DiffJob* m_job;
    DiffDetailJob* m_detailJob;
    DiffTableModel* m_model;
    DiffFilterProxy* m_proxy;
    QLineEdit* m_left;
    QLabel* m_models; ///< the config.json verdict: shown when A and B are different models
    QLabel* m_warnings; ///< what the sides' scans and mappings found
    QLabel* m_command;  ///< the `tessera diff` command line
    QLineEdit* m_right;
    QLineEdit* m_atol;
    QLineEdit* m_rtol;
    QPushButton* m_browseA = nullptr;
    QPushButton* m_browseB = nullptr;
    QPushButton* m_compare;
    QPushButton* m_loraUpdate;
    QPushButton* m_export;
    QPushButton* m_cancel;
    QProgressBar* m_progress;
    QLabel* m_summary;
    QComboBox* m_statusFilter;
    FilterBar* m_filter;
    QTableView* m_table;
    TensorNameDelegate* m_names;  ///< the name column's: whole components dropped, the shared prefix first
    ColumnFitter* m_nameColumn;   ///< never narrower than the rows' kept name parts
    DiffDetailView* m_detail;
};

} // namespace tessera::ui
