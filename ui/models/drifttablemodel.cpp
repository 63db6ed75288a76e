// SPDX-License-Identifier: GPL-3.0-or-later
#include "drifttablemodel.h"

#include "coreconvert.h"
#include "models/difftablemodel.h"
#include "widgets/rankcolors.h"

#include <QBrush>
#include <QGuiApplication>

#include <limits>

namespace tessera::ui {

namespace {
QString num(double v) { return DiffTableModel::numberText(v); }

QVariant optionalValue(const std::optional<double>& v) { return v ? QVariant(*v) : QVariant(); }

/// NaN or Inf sorts above every change, a missing change below every one.
QVariant changeSort(const tessera::DriftRecord* record)
{
    if (!record)
        return -2.0;
    if (record->nonFinite())
        return std::numeric_limits<double>::infinity();
    return record->relativeChange ? *record->relativeChange : -1.0;
}
} // namespace

QVariant driftRecordData(const tessera::DriftRecord& record, int role)
{
    switch (role) {
    case RelativeChangeRole:
        return optionalValue(record.relativeChange);
    case NormRole:
        return optionalValue(record.norm);
    case MaxAbsChangeRole:
        return optionalValue(record.maxAbsChange);
    case NanCountRole:
        return qulonglong(record.nan);
    case InfCountRole:
        return qulonglong(record.inf);
    case NonFiniteRole:
        return record.nonFinite();
    case WhyRole:
        return qs(record.why);
    case StepRole:
        return qlonglong(record.step);
    case TensorNameRole:
        return qs(record.name);
    case ProblemRole:
        return record.nonFinite() ? DriftTableModel::changeText(record) : QString();
    }
    return {};
}

DriftTableModel::DriftTableModel(QObject* parent) : QAbstractTableModel(parent) { }

DriftTableModel::~DriftTableModel() = default;

void DriftTableModel::setDrift(DriftPtr drift)
{
    beginResetModel();
    m_drift = std::move(drift);
    endResetModel();
}

void DriftTableModel::clear() { setDrift(nullptr); }

int DriftTableModel::rowOf(const QString& tensor) const
{
    return m_drift ? m_drift->tensorIndex(tensor.toStdString()) : -1;
}

const tessera::DriftRecord* DriftTableModel::record(int row, int step) const
{
    if (!m_drift || row < 0 || step < 0)
        return nullptr;
    return m_drift->record(std::size_t(row), std::size_t(step));
}

QString DriftTableModel::changeText(const tessera::DriftRecord& record)
{
    if (record.nonFinite()) {
        QStringList parts;
        if (record.nan)
            parts << tr("%1 NaN").arg(record.nan);
        if (record.inf)
            parts << tr("%1 Inf").arg(record.inf);
        return parts.join(QStringLiteral(", "));
    }
    return record.relativeChange ? changeNumber(*record.relativeChange, 3) : QStringLiteral("—");
}

QString DriftTableModel::changeNumber(double value, int digits)
{
    if (value == 0 || (value >= 0.01 && value < 1000))
        return QString::number(value, 'g', digits);
    QString text = QString::number(value, 'e', digits - 1); // "1.00e-03"
    const qsizetype e = text.indexOf(QLatin1Char('e'));
    QString mantissa = text.left(e);
    if (mantissa.contains(QLatin1Char('.'))) {
        while (mantissa.endsWith(QLatin1Char('0')))
            mantissa.chop(1);
        if (mantissa.endsWith(QLatin1Char('.')))
            mantissa.chop(1);
    }
    const int exponent = text.mid(e + 1).toInt();
    return mantissa + QLatin1Char('e') + QString::number(exponent);
}

QString DriftTableModel::recordToolTip(const tessera::DriftRecord& record)
{
    QStringList lines;
    lines << (record.previousStep ? tr("%1 at step %2 (vs %3)").arg(qs(record.name)).arg(record.step).arg(*record.previousStep)
                       : tr("%1 at step %2").arg(qs(record.name)).arg(record.step));
    if (record.relativeChange)
        lines << tr("relative change ‖ΔW‖/‖W‖ %1").arg(num(*record.relativeChange));
    else if (!record.why.empty())
        lines << tr("no relative change: %1").arg(qs(record.why));
    if (record.maxAbsChange)
        lines << tr("max |ΔW| %1").arg(num(*record.maxAbsChange));
    if (record.norm)
        lines << tr("‖W‖ %1").arg(num(*record.norm));
    if (record.nonFinite())
        lines << tr("NaN %1, Inf %2").arg(record.nan).arg(record.inf);
    lines << tr("%1 %2").arg(dtypeText(record.dtype), shapeText(record.shape));
    return lines.join(QLatin1Char('\n'));
}

int DriftTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_drift ? 0 : static_cast<int>(m_drift->tensorCount());
}

int DriftTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_drift ? 0 : FirstStepColumn + static_cast<int>(m_drift->stepCount());
}

QVariant DriftTableModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const int row = index.row();
    const QString name = qs(m_drift->report().tensors[std::size_t(row)]);
    if (index.column() == TensorColumn) {
        switch (role) {
        case Qt::DisplayRole:
        case Qt::ToolTipRole:
        case TensorNameRole:
            return name;
        case SortRole:
            return row; // the model's order
        }
        return {};
    }
    const int step = stepOfColumn(index.column());
    const tessera::DriftRecord* r = record(row, step);
    switch (role) {
    case Qt::DisplayRole:
        return r ? changeText(*r) : QString();
    case SortRole:
        return changeSort(r);
    case Qt::ToolTipRole:
        return r ? recordToolTip(*r)
                 : tr("%1 is not saved at step %2").arg(name).arg(m_drift->report().steps[std::size_t(step)].step);
    case Qt::TextAlignmentRole:
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::ForegroundRole:
        return r && r->nonFinite() ? QVariant(QBrush(problemColor(QGuiApplication::palette()))) : QVariant();
    case StepRole:
        return qlonglong(m_drift->report().steps[std::size_t(step)].step);
    case TensorNameRole:
        return name;
    }
    return r ? driftRecordData(*r, role) : QVariant();
}

QVariant DriftTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= columnCount())
        return {};
    if (section == TensorColumn) {
        if (role == Qt::DisplayRole)
            return tr("Tensor");
        if (role == Qt::ToolTipRole)
            return tr("Every tensor of the run, in the model's order (sort by this column to get it back)");
        return {};
    }
    const int step = stepOfColumn(section);
    const long long value = m_drift->report().steps[std::size_t(step)].step;
    const QString damage = qs(m_drift->damage(std::size_t(step)));
    switch (role) {
    case Qt::DisplayRole:
        return damage.isEmpty() ? tr("step %1").arg(value) : tr("step %1 (!)").arg(value);
    case Qt::ToolTipRole: {
        QString text = step > 0 ? tr("Relative change from the step before, ‖W%1 − W_prev‖ / ‖W_prev‖; NaN and Inf "
                                     "in red")
                                      .arg(value)
                                : tr("The first step: nothing to compare with; NaN and Inf in red");
        if (!damage.isEmpty())
            text += QLatin1Char('\n') + tr("Step %1 could not be read whole: %2").arg(value).arg(damage);
        return text;
    }
    case Qt::ForegroundRole:
        return damage.isEmpty() ? QVariant() : QVariant(QBrush(problemColor(QGuiApplication::palette())));
    case StepRole:
        return qlonglong(value);
    }
    return {};
}

} // namespace tessera::ui
