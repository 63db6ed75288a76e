// SPDX-License-Identifier: GPL-3.0-or-later
#include "mappingmodel.h"

#include "coreconvert.h"
#include "models/layerposition.h"
#include "widgets/rankcolors.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <QGuiApplication>
#include <QPalette>

namespace tessera::ui {

using tessera::MappingStatus;

namespace {
/// Sort order of the status column: what needs attention first.
int severity(MappingStatus status)
{
    switch (status) {
    case MappingStatus::ShapeMismatch:
        return 0;
    case MappingStatus::Missing:
        return 1;
    case MappingStatus::Unmapped:
        return 2;
    case MappingStatus::Duplicate:
        return 3;
    case MappingStatus::Unexpected:
        return 4;
    case MappingStatus::Ignored:
        return 5;
    case MappingStatus::Tied:
        return 6;
    case MappingStatus::Ok:
        return 7;
    }
    return 8;
}

std::uint64_t numel(const tessera::Shape& shape)
{
    std::uint64_t n = 1;
    for (auto d : shape)
        n *= static_cast<std::uint64_t>(d);
    return n;
}
/// The name a row's layer is read from: the Hugging Face name (uniform across families), else the source's.
QString rowName(const tessera::MappingRow& row) { return qs(row.target.empty() ? row.source : row.target); }
} // namespace

MappingModel::MappingModel(QObject* parent) : QAbstractTableModel(parent) { }

MappingModel::~MappingModel() = default;

void MappingModel::setOutcome(const MappingOutcome& outcome)
{
    beginResetModel();
    m_outcome = outcome;
    endResetModel();
}

const tessera::MappingRow* MappingModel::row(int row) const
{
    if (!m_outcome.result || row < 0 || row >= int(m_outcome.result->rows.size()))
        return nullptr;
    return &m_outcome.result->rows[std::size_t(row)];
}

QString MappingModel::layerText(const QString& name, qulonglong* sortKey)
{
    const LayerPosition position = layerPosition(name);
    const qlonglong layer = position.layer;
    const qlonglong expert = position.expert;
    // Each tower's rows sort together, the vision towers' after the language model's.
    if (sortKey)
        *sortKey = layer < 0
            ? ~0ULL
            : (qulonglong(position.vision) << 60) | (qulonglong(layer & 0xFFFFFFF) << 32) | qulonglong(expert + 1);
    if (layer < 0)
        return {};
    const QString number = position.vision ? tr("vision %1").arg(layer) : QString::number(layer);
    return expert < 0 ? number : tr("%1 · expert %2").arg(number).arg(expert);
}

const QVector<MappingStatus>& MappingModel::statuses()
{
    static const QVector<MappingStatus> all { MappingStatus::Ok,         MappingStatus::Tied,
                                              MappingStatus::Ignored,    MappingStatus::Unmapped,
                                              MappingStatus::Missing,    MappingStatus::ShapeMismatch,
                                              MappingStatus::Duplicate,  MappingStatus::Unexpected };
    return all;
}

QString MappingModel::statusText(MappingStatus status) { return QString::fromLatin1(tessera::mappingStatusName(status)); }

bool MappingModel::isProblem(MappingStatus status)
{
    return status != MappingStatus::Ok && status != MappingStatus::Tied && status != MappingStatus::Ignored;
}

QColor MappingModel::statusColor(MappingStatus status, const QPalette& palette)
{
    const bool dark = isDarkPalette(palette);
    switch (status) {
    case MappingStatus::Ok:
        return {};
    case MappingStatus::Unmapped:
    case MappingStatus::Missing:
    case MappingStatus::ShapeMismatch:
        return problemColor(palette);
    case MappingStatus::Ignored:
    case MappingStatus::Tied:
        return dark ? QColor(0x9a, 0x9a, 0x9a) : QColor(0x80, 0x80, 0x80);
    case MappingStatus::Duplicate:
    case MappingStatus::Unexpected:
        return dark ? QColor(0xff, 0xa7, 0x26) : QColor(0xb8, 0x5c, 0x00);
    }
    return {};
}

int MappingModel::rowCount(const QModelIndex& parent) const
{
    if (parent.isValid() || !m_outcome.result)
        return 0;
    return int(m_outcome.result->rows.size());
}

int MappingModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant MappingModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case LayerColumn:
            return tr("The layer (and expert) of the row; sort by it to group the rows by layer");
        case RuleColumn:
            return tr("The rule that maps the name (hover a row for the file that defines it)");
        case TargetShapeColumn:
            return tr("What the transform produces; \"≠\" shows the shape config.json expects");
        default:
            return {};
        }
    }
    if (role != Qt::DisplayRole)
        return {};
    switch (section) {
    case LayerColumn:
        return tr("Layer");
    case SourceColumn:
        return m_outcome.megatron ? tr("Megatron name") : tr("Checkpoint name");
    case TargetColumn:
        return tr("Hugging Face name");
    case RuleColumn:
        return tr("Rule");
    case TransformColumn:
        return tr("Transform");
    case SourceShapeColumn:
        return tr("Source shape");
    case TargetShapeColumn:
        return tr("Target shape");
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
    const auto& r = m_outcome.result->rows[std::size_t(index.row())];
    const bool missing = r.status == MappingStatus::Missing;
    switch (role) {
    case TensorIndexRole:
        return m_outcome.tensorIndex.value(index.row(), -1);
    case StatusRole:
        return int(r.status);
    case DetailRole:
        return qs(r.detail);
    case Qt::ToolTipRole: {
        QString tip = QStringLiteral("%1 → %2").arg(r.source.empty() ? QStringLiteral("—") : qs(r.source),
                                                    r.target.empty() ? QStringLiteral("—") : qs(r.target));
        if (!r.detail.empty())
            tip += QLatin1Char('\n') + qs(r.detail);
        if (!r.ruleOrigin.empty())
            tip += QLatin1Char('\n') + tr("rule %1 from %2").arg(qs(r.rule), qs(r.ruleOrigin));
        return tip;
    }
    case Qt::ForegroundRole: {
        const QColor color = statusColor(r.status, QGuiApplication::palette());
        // Grey rows (ignored, tied) recede as a whole; problems colour (and embolden) their status cell only, so long
        // tables stay readable.
        const bool grey = r.status == MappingStatus::Ignored || r.status == MappingStatus::Tied;
        if (!color.isValid() || (!grey && index.column() != StatusColumn))
            return {};
        return QBrush(color);
    }
    case Qt::FontRole:
        if (index.column() == StatusColumn && isProblem(r.status)) {
            QFont bold;
            bold.setBold(true);
            return bold;
        }
        return {};
    case SortRole:
        switch (index.column()) {
        case LayerColumn: {
            qulonglong key = 0;
            layerText(rowName(r), &key);
            return key;
        }
        case SourceShapeColumn:
            return QVariant::fromValue<qulonglong>(r.source.empty() ? 0 : numel(r.sourceShape));
        case TargetShapeColumn:
            return QVariant::fromValue<qulonglong>(missing ? (r.expectedShape ? numel(*r.expectedShape) : 0)
                                                           : numel(r.targetShape));
        case StatusColumn:
            return severity(r.status);
        default:
            break;
        }
        [[fallthrough]];
    case Qt::DisplayRole:
        switch (index.column()) {
        case LayerColumn:
            return layerText(rowName(r));
        case SourceColumn:
            return r.source.empty() ? QStringLiteral("—") : qs(r.source);
        case TargetColumn:
            return r.target.empty() ? QStringLiteral("—") : qs(r.target);
        case RuleColumn:
            return qs(r.rule);
        case TransformColumn:
            return qs(r.transform);
        case SourceShapeColumn:
            return r.source.empty() ? QString() : shapeText(r.sourceShape);
        case TargetShapeColumn:
            if (missing)
                return r.expectedShape ? tr("%1 expected").arg(shapeText(*r.expectedShape)) : QString();
            if (r.target.empty())
                return QString();
            if (r.expectedShape && *r.expectedShape != r.targetShape)
                return tr("%1 ≠ %2").arg(shapeText(r.targetShape), shapeText(*r.expectedShape));
            return shapeText(r.targetShape);
        case StatusColumn:
            return statusText(r.status);
        default:
            return {};
        }
    default:
        return {};
    }
}

} // namespace tessera::ui
