// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "models/indexeddrift.h"
#include "models/roles.h"

#include <QAbstractTableModel>

namespace tessera::ui {

/// Item data roles of the Run page's models (beside roles.h's SortRole and ProblemRole).
enum DriftRole {
    RelativeChangeRole = Qt::UserRole + 64, ///< double ‖W_s − W_prev‖/‖W_prev‖; invalid when there is none
    NormRole,                               ///< double ‖W_s‖; invalid when unknown
    MaxAbsChangeRole,                       ///< double max |W_s − W_prev|; invalid when unknown
    NanCountRole,                           ///< qulonglong
    InfCountRole,                           ///< qulonglong
    NonFiniteRole,                          ///< bool: W_s holds NaN or Inf
    WhyRole,                                ///< QString: why there is no relative change ("first step", …)
    StepRole,                               ///< qlonglong: the training step of the column (or of the heatmap)
    TensorNameRole,                         ///< QString: the tensor of the row (of the cell: its worst tensor)
};

/// The table of `tessera drift`: one row per tensor (in the model's order), one column per saved step holding the
/// relative change from the step before, NaN/Inf flagged in red. DisplayRole is formatted text, SortRole the raw
/// value (a NaN or Inf sorts above every change, a missing change below), the DriftRole roles the record's values.
class DriftTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { TensorColumn = 0, FirstStepColumn = 1 };

    explicit DriftTableModel(QObject* parent = nullptr);
    ~DriftTableModel() override;

    void setDrift(DriftPtr drift);
    void clear();
    const DriftPtr& drift() const { return m_drift; }
    /// The column of step index `step` (into the report's steps).
    static int columnOfStep(int step) { return FirstStepColumn + step; }
    /// The step index of `column`, -1 for the tensor column.
    static int stepOfColumn(int column) { return column - FirstStepColumn; }
    /// The row of `tensor`, -1 when the run has no such tensor.
    int rowOf(const QString& tensor) const;
    /// The record shown at (row, step index); null when that step lacks the tensor.
    const tessera::DriftRecord* record(int row, int step) const;

    /// What a cell shows for `record`: "0.0123", "3 NaN", "1 Inf", "—" (no change: first step, …).
    static QString changeText(const tessera::DriftRecord& record);
    /// A change in `digits` significant digits, short enough for a narrow column: "0.12", "9.87e-4", "1e-3".
    static QString changeNumber(double value, int digits);
    /// Everything known of `record` in a few lines, for tooltips.
    static QString recordToolTip(const tessera::DriftRecord& record);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    DriftPtr m_drift;
};

/// `record`'s DriftRole value for `role` (the roles the table and the heatmap share), invalid for another role.
QVariant driftRecordData(const tessera::DriftRecord& record, int role);

} // namespace tessera::ui
