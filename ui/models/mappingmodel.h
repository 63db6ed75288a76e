// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "checkpointptr.h"

#include <QAbstractTableModel>

namespace tessera::ui {

/// Source name → target name with status, one row per tensor.
///
/// Until the name-mapping engine (Megatron → Hugging Face) is published by the core, every name maps to itself
/// with the status "unchanged"; the columns are the ones the mapping view will keep.
class MappingModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { SourceColumn, TargetColumn, ShapeColumn, DTypeColumn, StatusColumn, ColumnCount };

    explicit MappingModel(QObject* parent = nullptr);
    ~MappingModel() override;

    void setCheckpoint(CheckpointPtr checkpoint);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    CheckpointPtr m_checkpoint;
};

} // namespace tessera::ui
