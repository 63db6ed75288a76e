// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "models/drifttablemodel.h"

#include <QAbstractTableModel>
#include <QStringList>

#include <optional>
#include <utility>
#include <vector>

namespace tessera::ui {

/// The Run page's heatmap as a table: one row per layer (model.layers.N, then any vision tower's), one column per
/// module of a layer (attention q, k, v, o; MLP gate, up, down; the experts' modules, each the largest over
/// every expert; the norms; then whatever else a layer holds), and "other" rows at the bottom for the tensors
/// outside the layers (embeddings, final norm, lm_head), one per cell, each labelled. A cell shows one step's
/// relative change (setStep()); DriftRole roles give the values (TensorNameRole the cell's worst tensor: its
/// NaN/Inf, else its largest change), CellTensorsRole all of its tensors.
class DriftGridModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum GridRole {
        CellTensorsRole = TensorNameRole + 16, ///< QStringList: every tensor of the cell
        CellLabelRole,                         ///< QString: an "other" cell's short name ("lm_head"), else empty
    };

    explicit DriftGridModel(QObject* parent = nullptr);
    ~DriftGridModel() override;

    void setDrift(DriftPtr drift);
    void clear();
    const DriftPtr& drift() const { return m_drift; }
    /// The step shown, an index into the report's steps.
    void setStep(int step);
    int step() const { return m_step; }
    /// The rows from this one on hold the tensors outside the layers.
    int firstOtherRow() const { return static_cast<int>(m_layers.size()); }
    /// The cell holding `tensor`; invalid when the run has no such tensor.
    QModelIndex indexOfTensor(const QString& tensor) const;
    /// The smallest positive and the largest finite relative change over every cell of every step: one colour
    /// scale for all steps; none when no cell has a positive change.
    std::optional<std::pair<double, double>> changeRange() const;
    /// The short name of a layer's module as a column shows it ("q", "experts down").
    static QString moduleLabel(const QString& module);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    /// One cell at one step, summed over its tensors.
    struct CellValue {
        std::optional<double> change; ///< the largest relative change of its tensors
        std::uint64_t nan = 0;
        std::uint64_t inf = 0;
        int worst = -1;               ///< its tensor with NaN/Inf, else the largest change, else the first; -1: none
    };
    void build();
    int cellOf(int row, int column) const { return row * columnCount() + column; }
    const CellValue* value(const QModelIndex& index) const;

    DriftPtr m_drift;
    int m_step = 0;
    std::vector<std::pair<bool, qlonglong>> m_layers; ///< (vision, layer) of each layer row
    std::vector<QString> m_modules;                   ///< each column's module (without .weight)
    int m_columns = 0;
    std::vector<std::vector<int>> m_cells;            ///< each cell's tensors (indexes into the report's tensors)
    std::vector<int> m_cellOfTensor;                  ///< each tensor's cell
    std::vector<std::vector<CellValue>> m_values;     ///< [step][cell]
};

} // namespace tessera::ui
