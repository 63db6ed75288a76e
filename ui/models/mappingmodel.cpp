// SPDX-License-Identifier: GPL-3.0-or-later
#include "mappingmodel.h"

#include "coreconvert.h"
#include "roles.h"

namespace tessera::ui {

MappingModel::MappingModel(QObject* parent) : QAbstractTableModel(parent) { }

MappingModel::~MappingModel() = default;

void MappingModel::setCheckpoint(CheckpointPtr checkpoint)
{
    beginResetModel();
    m_checkpoint = std::move(checkpoint);
    endResetModel();
}

int MappingModel::rowCount(const QModelIndex& parent) const
{
    if (parent.isValid() || !m_checkpoint)
        return 0;
    return static_cast<int>(m_checkpoint->tensors.size());
}

int MappingModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant MappingModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case SourceColumn:
        return tr("Checkpoint name");
    case TargetColumn:
        return tr("Hugging Face name");
    case ShapeColumn:
        return tr("Shape");
    case DTypeColumn:
        return tr("DType");
    case StatusColumn:
        return tr("Status");
    default:
        return {};
    }
}

QVariant MappingModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& tensor = m_checkpoint->tensors[index.row()];
    switch (role) {
    case TensorIndexRole:
        return index.row();
    case SortRole:
        if (index.column() == ShapeColumn)
            return QVariant::fromValue<qulonglong>(tensor.numel());
        [[fallthrough]];
    case Qt::DisplayRole:
        switch (index.column()) {
        case SourceColumn:
        case TargetColumn:
            return qs(tensor.name);
        case ShapeColumn:
            return shapeText(tensor.shape);
        case DTypeColumn:
            return dtypeText(tensor.dtype);
        case StatusColumn:
            return tr("unchanged");
        default:
            return {};
        }
    default:
        return {};
    }
}

} // namespace tessera::ui
