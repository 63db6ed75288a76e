// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "models/roles.h"

#include "compare/training_norms.h"

#include <QAbstractTableModel>

#include <memory>

namespace tessera::ui {

using TrainingNormsPtr = std::shared_ptr<const tessera::TrainingNorms>;

/// One row per parameter of the optimizer (tessera::computeTrainingNorms), in the model's order: its name, index,
/// shape, Adam step, ‖exp_avg‖₂ and ‖√exp_avg_sq‖₂, and why a norm is missing. DisplayRole is formatted text,
/// SortRole the raw value (a missing norm sorts below every number).
class TrainingNormsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { ParameterColumn, IndexColumn, ShapeColumn, StepColumn, ExpAvgColumn, ExpAvgSqColumn, NoteColumn, ColumnCount };

    explicit TrainingNormsModel(QObject* parent = nullptr);
    ~TrainingNormsModel() override;

    void setNorms(TrainingNormsPtr norms);
    void clear();
    const TrainingNormsPtr& norms() const { return m_norms; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    QVariant display(const tessera::ParameterNorms& r, int column) const;
    QVariant sortValue(const tessera::ParameterNorms& r, int column) const;

    TrainingNormsPtr m_norms;
};

} // namespace tessera::ui
