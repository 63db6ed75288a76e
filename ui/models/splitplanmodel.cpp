// SPDX-License-Identifier: GPL-3.0-or-later
#include "splitplanmodel.h"

#include "coreconvert.h"
#include "split/split_plan.h"
#include "split/split_training.h"

#include <filesystem>

namespace tessera::ui {

SplitPlanModel::SplitPlanModel(QObject* parent) : QAbstractTableModel(parent) { }

SplitPlanModel::~SplitPlanModel() = default;

void SplitPlanModel::setPlan(std::shared_ptr<const tessera::SplitPlan> plan)
{
    beginResetModel();
    m_plan = std::move(plan);
    m_rows.clear();
    if (m_plan) {
        for (const auto& f : m_plan->files) {
            QString tooltip;
            if (!f.tensors.empty())
                tooltip = tr("%1 … %2").arg(qs(f.tensors.front().spec.name), qs(f.tensors.back().spec.name));
            if (f.listChunks.size() > 1)
                tooltip += tr("\n%1 state dicts, one per virtual pipeline stage").arg(f.listChunks.size());
            m_rows.push_back({ qs(f.name), f.rank, qint64(f.tensors.size()), f.bytes, tooltip });
        }
        addTrainingRows();
        if (!m_plan->dcpFolder.empty() || m_plan->format == tessera::SplitFormat::Dcp)
            m_rows.push_back({ qs(m_plan->dcpFolder.empty() ? ".metadata" : m_plan->dcpFolder + "/.metadata"), -1, -1, 0,
                               tr("the DCP metadata: every tensor's chunks and where their bytes are") });
        for (const auto& g : m_plan->generatedFiles)
            m_rows.push_back({ qs(g.first), -1, -1, quint64(g.second.size()), tr("written by Tessera") });
        for (const auto& g : m_plan->generatedPickles)
            m_rows.push_back({ qs(g.first), -1, -1, 0, tr("written by Tessera (torch.save)") });
        if (!m_plan->config.files.empty())
            m_rows.push_back({ qs(m_plan->sideFolder.empty() ? std::string(".") : m_plan->sideFolder + "/"), -1, -1, 0,
                               tr("%1 config and tokenizer files from %2")
                                   .arg(m_plan->config.files.size())
                                   .arg(qs(m_plan->config.path)) });
    }
    endResetModel();
}

void SplitPlanModel::addTrainingRows()
{
    if (!m_plan->training)
        return;
    const tessera::TrainingSplit& t = *m_plan->training;
    for (const auto& f : t.files.files)
        m_rows.push_back({ qs(f.name), f.rank, qint64(f.tensors.size()), f.bytes,
                           t.state.dcp ? tr("training state: the optimizer's tensors (and on rank 0 the other entries)")
                                       : tr("training state: the optimizer's state, resharded like the parameters") });
    for (const auto& e : t.extraState) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(e.source, ec);
        m_rows.push_back({ qs(e.name), int(&e - t.extraState.data()), -1, ec ? 0 : quint64(size),
                           tr("training state: old rank %1's scheduler and random state").arg(e.fromRank) });
    }
}

int SplitPlanModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }

int SplitPlanModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant SplitPlanModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case FileColumn: return tr("File");
    case RankColumn: return tr("Rank");
    case TensorsColumn: return tr("Tensors");
    case SizeColumn: return tr("Size");
    default: return {};
    }
}

QVariant SplitPlanModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Row& row = m_rows[index.row()];
    switch (role) {
    case Qt::TextAlignmentRole:
        if (index.column() != FileColumn)
            return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        return {};
    case Qt::ToolTipRole:
        return row.tooltip.isEmpty() ? QVariant() : QVariant(row.tooltip);
    case Qt::DisplayRole:
        switch (index.column()) {
        case FileColumn: return row.name;
        case RankColumn: return row.rank >= 0 ? QVariant(row.rank) : QVariant();
        case TensorsColumn: return row.tensors >= 0 ? QVariant(row.tensors) : QVariant();
        case SizeColumn: return row.size ? QVariant(bytesText(row.size)) : QVariant();
        default: return {};
        }
    default:
        return {};
    }
}

} // namespace tessera::ui
