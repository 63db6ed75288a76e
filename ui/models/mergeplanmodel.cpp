// SPDX-License-Identifier: GPL-3.0-or-later
#include "mergeplanmodel.h"

#include "coreconvert.h"
#include "merge/merge_plan.h"
#include "roles.h"

#include <QDir>
#include <QFileInfo>

namespace tessera::ui {

MergePlanModel::MergePlanModel(QObject* parent) : QAbstractTableModel(parent) { }

MergePlanModel::~MergePlanModel() = default;

void MergePlanModel::setPlan(std::shared_ptr<const tessera::MergePlan> plan)
{
    beginResetModel();
    m_plan = std::move(plan);
    m_rows.clear();
    if (m_plan) {
        for (const auto& file : m_plan->files) {
            QString contents;
            if (!file.tensors.empty()) {
                const auto& first = m_plan->tensors[file.tensors.front()].name;
                const auto& last = m_plan->tensors[file.tensors.back()].name;
                contents = file.tensors.size() == 1 ? qs(first) : tr("%1 … %2").arg(qs(first), qs(last));
            }
            m_rows.push_back({ Kind::Weights, qs(file.name), qint64(file.tensors.size()), file.size, contents });
        }
        if (!m_plan->indexJson.empty())
            m_rows.push_back({ Kind::Index, QStringLiteral("model.safetensors.index.json"), -1, m_plan->indexJson.size(),
                               tr("weight map: which file holds each tensor") });
        const QDir config(qs(m_plan->config.path));
        for (const auto& side : m_plan->config.files) {
            const QString name = qs(side);
            QString contents = tr("copied from %1/").arg(config.dirName());
            if (name == QLatin1String("config.json")) {
                QStringList edits;
                if (m_plan->configDtype)
                    edits << tr("torch_dtype set to %1").arg(dtypeText(*m_plan->configDtype));
                if (m_plan->configTied)
                    edits << tr("tie_word_embeddings set to true");
                if (m_plan->configDequantized)
                    edits << tr("quantization_config removed (the weights are unquantized)");
                if (!edits.isEmpty())
                    contents = tr("copied, %1").arg(edits.join(QStringLiteral(", ")));
            }
            m_rows.push_back({ Kind::SideFile, name, -1, quint64(QFileInfo(config.filePath(name)).size()), contents });
        }
    }
    endResetModel();
}

int MergePlanModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }

int MergePlanModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant MergePlanModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case FileColumn:
        return tr("File");
    case TensorsColumn:
        return tr("Tensors");
    case SizeColumn:
        return tr("Size");
    case ContentsColumn:
        return tr("Contents");
    default:
        return {};
    }
}

QVariant MergePlanModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Row& row = m_rows[index.row()];
    switch (role) {
    case Qt::TextAlignmentRole:
        if (index.column() == TensorsColumn || index.column() == SizeColumn)
            return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        return {};
    case Qt::ForegroundRole:
        return {};
    case SortRole:
        if (index.column() == SizeColumn)
            return QVariant::fromValue<qulonglong>(row.size);
        if (index.column() == TensorsColumn)
            return row.tensors;
        [[fallthrough]];
    case Qt::DisplayRole:
        switch (index.column()) {
        case FileColumn:
            return row.name;
        case TensorsColumn:
            return row.tensors >= 0 ? QVariant(QString::number(row.tensors)) : QVariant(QString());
        case SizeColumn:
            return bytesText(row.size);
        case ContentsColumn:
            return row.contents;
        default:
            return {};
        }
    case Qt::ToolTipRole:
        if (index.column() != ContentsColumn)
            return {};
        return row.kind == Kind::SideFile && m_plan
            ? QVariant(QDir::toNativeSeparators(QDir(qs(m_plan->config.path)).filePath(row.name)))
            : QVariant(row.contents);
    default:
        return {};
    }
}

} // namespace tessera::ui
