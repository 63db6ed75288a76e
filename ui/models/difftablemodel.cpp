// SPDX-License-Identifier: GPL-3.0-or-later
#include "difftablemodel.h"

#include "coreconvert.h"

#include <QBrush>
#include <QColor>
#include <QFont>

#include <cmath>
#include <limits>

namespace tessera::ui {

using tessera::DiffStatus;
using tessera::TensorDiff;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Rows whose values were never compared because something is wrong sort as the worst value of a column; rows
/// still pending sort as the best, so "largest first" puts the problems on top either way.
bool isProblemWithoutValues(const TensorDiff& t) { return !t.compared && t.status != DiffStatus::Pending; }

QString pairText(std::uint64_t a, std::uint64_t b) { return QStringLiteral("%1 / %2").arg(a).arg(b); }
} // namespace

DiffTableModel::DiffTableModel(QObject* parent) : QAbstractTableModel(parent) { }

DiffTableModel::~DiffTableModel() = default;

void DiffTableModel::setRows(std::vector<TensorDiff> rows)
{
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
}

void DiffTableModel::updateRows(const std::vector<std::pair<std::size_t, TensorDiff>>& rows)
{
    for (const auto& [index, row] : rows) {
        if (index >= m_rows.size() || m_rows[index].name != row.name)
            continue; // from another report; the job's generation counter should have dropped it
        m_rows[index] = row;
        const int r = static_cast<int>(index);
        Q_EMIT dataChanged(this->index(r, 0), this->index(r, ColumnCount - 1));
    }
}

void DiffTableModel::clear() { setRows({}); }

const TensorDiff* DiffTableModel::row(int row) const
{
    return row >= 0 && row < static_cast<int>(m_rows.size()) ? &m_rows[static_cast<std::size_t>(row)] : nullptr;
}

int DiffTableModel::rowOf(const QString& name) const
{
    const std::string key = name.toStdString();
    for (std::size_t i = 0; i < m_rows.size(); ++i)
        if (m_rows[i].name == key)
            return static_cast<int>(i);
    return -1;
}

int DiffTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int DiffTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QString DiffTableModel::numberText(double value)
{
    if (std::isnan(value))
        return QStringLiteral("NaN");
    if (std::isinf(value))
        return value > 0 ? QStringLiteral("∞") : QStringLiteral("−∞");
    if (value == 0)
        return QStringLiteral("0");
    return QString::number(value, 'g', 4);
}

QString DiffTableModel::exactText(double value)
{
    if (!std::isfinite(value) || value == 0)
        return numberText(value);
    return QString::number(value, 'g', 7);
}

QString DiffTableModel::cosineText(double cosine)
{
    if (cosine == 1)
        return QStringLiteral("1");
    if (cosine > 0.9999)
        return QStringLiteral("1 − %1").arg(QString::number(1 - cosine, 'g', 2));
    return QString::number(cosine, 'f', 6);
}

int DiffTableModel::severity(DiffStatus status)
{
    switch (status) {
    case DiffStatus::Failed:
        return 0;
    case DiffStatus::Incomplete:
        return 1;
    case DiffStatus::MissingInA:
        return 1;
    case DiffStatus::MissingInB:
        return 2;
    case DiffStatus::ShapeMismatch:
        return 3;
    case DiffStatus::DtypeMismatch:
        return 4;
    case DiffStatus::Different:
        return 5;
    case DiffStatus::WithinTolerance:
        return 6;
    case DiffStatus::Identical:
        return 7;
    case DiffStatus::Pending:
        return 8;
    }
    return 9;
}

QVariant DiffTableModel::sortValue(const TensorDiff& t, int column) const
{
    const bool problem = isProblemWithoutValues(t);
    auto metric = [&](double v) { return QVariant(t.compared ? v : problem ? kInf : -1.0); };
    switch (column) {
    case NameColumn:
        return qs(t.name);
    case StatusColumn:
        return severity(t.status);
    case MaxAbsColumn:
        return metric(t.maxAbsDiff);
    case MeanAbsColumn:
        return metric(t.meanAbsDiff);
    case MaxRelColumn:
        return metric(t.maxRelDiff);
    case CosineColumn:
        return t.compared ? t.cosine : problem ? -2.0 : 2.0;
    case DifferingColumn:
        return t.compared ? static_cast<qulonglong>(t.differing)
                          : problem ? std::numeric_limits<qulonglong>::max() : qulonglong(0);
    case NanColumn:
        return static_cast<qulonglong>(t.a.nan + t.b.nan);
    case InfColumn:
        return static_cast<qulonglong>(t.a.inf + t.b.inf);
    case BitEqualColumn:
        return t.compared ? (t.bitEqual ? 1 : 0) : problem ? -1 : 2;
    case DtypeColumn:
        return qs(std::string(tessera::torchName(t.indexA >= 0 ? t.dtypeA : t.dtypeB)));
    case ShapeColumn:
        return static_cast<qulonglong>(t.elements);
    }
    return {};
}

void DiffTableModel::setUpdateView(bool updateView)
{
    if (updateView == m_updateView)
        return;
    m_updateView = updateView;
    if (!m_rows.empty())
        Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

QString DiffTableModel::statusText(tessera::DiffStatus status, bool updateView)
{
    if (updateView && (status == DiffStatus::Different || status == DiffStatus::WithinTolerance))
        return tr("updated");
    if (updateView && status == DiffStatus::Identical)
        return tr("unchanged");
    return QString::fromLatin1(tessera::diffStatusName(status));
}

QVariant DiffTableModel::data(const QModelIndex& index, int role) const
{
    const TensorDiff* t = row(index.row());
    if (!t || index.column() < 0 || index.column() >= ColumnCount)
        return {};
    const int column = index.column();
    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case NameColumn:
            return qs(t->name);
        case StatusColumn:
            return statusText(t->status, m_updateView);
        case MaxAbsColumn:
            if (!t->compared || !t->numeric)
                return QStringLiteral("–");
            // A NaN opposite a number is no distance at all: say NaN, not ∞ (a true ∞ is an infinity opposite).
            if (t->nanOpposite > 0 && std::isinf(t->maxAbsDiff))
                return QStringLiteral("NaN");
            return numberText(t->maxAbsDiff);
        case MeanAbsColumn:
            return t->compared && t->numeric ? numberText(t->meanAbsDiff) : QStringLiteral("–");
        case MaxRelColumn:
            return t->compared && t->numeric ? numberText(t->maxRelDiff) : QStringLiteral("–");
        case CosineColumn:
            return t->compared && t->numeric ? cosineText(t->cosine) : QStringLiteral("–");
        case DifferingColumn:
            return t->compared ? QString::number(t->differing) : QStringLiteral("–");
        case NanColumn:
            return t->compared && t->numeric ? pairText(t->a.nan, t->b.nan) : QStringLiteral("–");
        case InfColumn:
            return t->compared && t->numeric ? pairText(t->a.inf, t->b.inf) : QStringLiteral("–");
        case BitEqualColumn:
            return t->compared ? (t->bitEqual ? tr("yes") : tr("no")) : QStringLiteral("–");
        case DtypeColumn: {
            if (t->indexA < 0 || t->indexB < 0 || t->dtypeA == t->dtypeB)
                return dtypeText(t->indexA >= 0 ? t->dtypeA : t->dtypeB);
            return QString(dtypeText(t->dtypeA) + QStringLiteral(" / ") + dtypeText(t->dtypeB));
        }
        case ShapeColumn:
            if (t->indexA < 0 || t->indexB < 0 || t->shapeA == t->shapeB)
                return shapeText(t->indexA >= 0 ? t->shapeA : t->shapeB);
            return QString(shapeText(t->shapeA) + QStringLiteral(" / ") + shapeText(t->shapeB));
        }
        return {};
    case SortRole:
        return sortValue(*t, column);
    case StatusRole:
        return static_cast<int>(t->status);
    case NameRole:
        return qs(t->name);
    case Qt::ToolTipRole:
        return t->detail.empty() ? QVariant() : QVariant(qs(t->name) + QLatin1Char('\n') + qs(t->detail));
    case Qt::TextAlignmentRole:
        if (column == NameColumn || column == StatusColumn || column == DtypeColumn || column == ShapeColumn)
            return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::ForegroundRole:
        if (column != StatusColumn && !(column == DifferingColumn && t->differing > 0))
            return {};
        if (m_updateView && (t->status == DiffStatus::Different || t->status == DiffStatus::WithinTolerance))
            return QBrush(QColor(0x1f, 0x77, 0xb4)); // what the adapter adds: expected, not a failure
        switch (t->status) {
        case DiffStatus::Identical:
            return QBrush(QColor(0x2e, 0x8b, 0x3e));
        case DiffStatus::WithinTolerance:
            return QBrush(QColor(0xb8, 0x74, 0x00));
        case DiffStatus::Pending:
            return {};
        default:
            return QBrush(QColor(0xd0, 0x30, 0x30));
        }
    case Qt::FontRole:
        if (column == StatusColumn && !tessera::diffStatusOk(t->status) && t->status != DiffStatus::Pending
            && !(m_updateView && t->status == DiffStatus::Different)) {
            QFont bold;
            bold.setBold(true);
            return bold;
        }
        return {};
    }
    return {};
}

QVariant DiffTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case MaxAbsColumn:
            return tr("Largest |a − b|; NaN when a NaN sits opposite a number, ∞ when an infinity does");
        case MeanAbsColumn:
            return tr("Mean |a − b| over elements finite on both sides");
        case MaxRelColumn:
            return tr("Largest |a − b| / |b| over differing elements; ∞ when b is 0");
        case CosineColumn:
            return tr("Cosine similarity of A and B as vectors (finite elements)");
        case DifferingColumn:
            return tr("Elements with a ≠ b (NaN opposite NaN counts as equal)");
        case NanColumn:
            return tr("NaN elements in A / in B");
        case InfColumn:
            return tr("Infinite elements in A / in B");
        case BitEqualColumn:
            return tr("Same dtype and identical bytes");
        }
        return {};
    }
    if (role != Qt::DisplayRole)
        return {};
    switch (section) {
    case NameColumn:
        return tr("Tensor");
    case StatusColumn:
        return tr("Status");
    case MaxAbsColumn:
        return tr("max |a−b|");
    case MeanAbsColumn:
        return tr("mean |a−b|");
    case MaxRelColumn:
        return tr("max rel");
    case CosineColumn:
        return tr("cosine");
    case DifferingColumn:
        return tr("differing");
    case NanColumn:
        return tr("NaN A/B");
    case InfColumn:
        return tr("Inf A/B");
    case BitEqualColumn:
        return tr("bits =");
    case DtypeColumn:
        return tr("dtype");
    case ShapeColumn:
        return tr("shape");
    }
    return {};
}

} // namespace tessera::ui
