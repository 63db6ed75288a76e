// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "models/roles.h"

#include "compare/tensor_diff.h"

#include <QAbstractTableModel>

#include <utility>
#include <vector>

namespace tessera::ui {

/// One row per tensor name of a diff (`tessera diff A B`): status, error statistics, NaN/Inf counts, bit equality,
/// dtypes and shapes. Rows arrive pending (setRows) and are filled in as the worker finishes them (updateRows).
/// DisplayRole is formatted text, SortRole the raw value (problems sort as the worst value of a column).
class DiffTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        NameColumn,
        StatusColumn,
        MaxAbsColumn,
        MeanAbsColumn,
        MaxRelColumn,
        CosineColumn,
        DifferingColumn,
        NanColumn,
        InfColumn,
        BitEqualColumn,
        DtypeColumn,
        ShapeColumn,
        ColumnCount
    };
    enum DiffRole {
        StatusRole = RankRole + 1, ///< int: tessera::DiffStatus
        NameRole,                  ///< QString: the tensor name
    };

    explicit DiffTableModel(QObject* parent = nullptr);
    ~DiffTableModel() override;

    void setRows(std::vector<tessera::TensorDiff> rows);
    /// Replaces rows by their index in the report.
    void updateRows(const std::vector<std::pair<std::size_t, tessera::TensorDiff>>& rows);
    void clear();
    /// A LoRA update view (a fused model against its own base weights): a differing weight is what its adapter
    /// adds, shown as "updated" rather than as a failure, and an equal one as "unchanged".
    void setUpdateView(bool updateView);
    bool isUpdateView() const { return m_updateView; }
    /// The status as the table shows it: diffStatusName(), or "updated"/"unchanged" in an update view.
    static QString statusText(tessera::DiffStatus status, bool updateView);
    const tessera::TensorDiff* row(int row) const;
    int rowOf(const QString& name) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    /// "0.00195", "∞", "0": how the tables show a statistic.
    static QString numberText(double value);
    /// More digits than the table (7 significant), where values are read exactly: detail and statistics panels.
    static QString exactText(double value);
    /// "1", "1 − 6e-08", "0.912345": cosine similarity, keeping the distance to 1 readable.
    static QString cosineText(double cosine);
    /// Severity order used to sort the status column: failed first, identical last, pending after.
    static int severity(tessera::DiffStatus status);

private:
    QVariant sortValue(const tessera::TensorDiff& t, int column) const;

    std::vector<tessera::TensorDiff> m_rows;
    bool m_updateView = false;
};

} // namespace tessera::ui
