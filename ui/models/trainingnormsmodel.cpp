// SPDX-License-Identifier: GPL-3.0-or-later
#include "trainingnormsmodel.h"

#include "compare/training_report.h"
#include "coreconvert.h"
#include "widgets/rankcolors.h"

#include <QBrush>
#include <QGuiApplication>

#include <limits>

namespace tessera::ui {

namespace {
QString normText(const std::optional<double>& v)
{
    return v ? QString::number(*v, 'g', 6) : QStringLiteral("—");
}

/// A missing value sorts below every number, in either direction's bottom or top alike.
QVariant normSort(const std::optional<double>& v)
{
    return v ? *v : -std::numeric_limits<double>::infinity();
}
} // namespace

TrainingNormsModel::TrainingNormsModel(QObject* parent) : QAbstractTableModel(parent) { }

TrainingNormsModel::~TrainingNormsModel() = default;

void TrainingNormsModel::setNorms(TrainingNormsPtr norms)
{
    beginResetModel();
    m_norms = std::move(norms);
    endResetModel();
}

void TrainingNormsModel::clear() { setNorms(nullptr); }

int TrainingNormsModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_norms ? 0 : static_cast<int>(m_norms->parameters.size());
}

int TrainingNormsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant TrainingNormsModel::display(const tessera::ParameterNorms& r, int column) const
{
    switch (column) {
    case ParameterColumn:
        return qs(r.parameter);
    case IndexColumn:
        return QString::number(r.index);
    case ShapeColumn:
        return shapeText(r.shape);
    case StepColumn:
        return r.step ? qs(tessera::stepText(*r.step)) : QStringLiteral("—");
    case ExpAvgColumn:
        return normText(r.expAvgNorm);
    case ExpAvgSqColumn:
        return normText(r.expAvgSqRootNorm);
    case NoteColumn:
        return qs(r.note);
    }
    return {};
}

QVariant TrainingNormsModel::sortValue(const tessera::ParameterNorms& r, int column) const
{
    switch (column) {
    case ParameterColumn:
        return qs(r.parameter);
    case IndexColumn:
        return static_cast<qlonglong>(r.index);
    case ShapeColumn: {
        double elements = 1;
        for (auto d : r.shape)
            elements *= static_cast<double>(d);
        return elements;
    }
    case StepColumn:
        return normSort(r.step);
    case ExpAvgColumn:
        return normSort(r.expAvgNorm);
    case ExpAvgSqColumn:
        return normSort(r.expAvgSqRootNorm);
    case NoteColumn:
        return qs(r.note);
    }
    return {};
}

QVariant TrainingNormsModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || !m_norms || index.row() >= rowCount() || index.column() >= ColumnCount)
        return {};
    const auto& r = m_norms->parameters[static_cast<std::size_t>(index.row())];
    switch (role) {
    case Qt::DisplayRole:
        return display(r, index.column());
    case SortRole:
        return sortValue(r, index.column());
    case ProblemRole:
        return qs(r.note);
    case Qt::ToolTipRole:
        return r.note.empty() ? qs(r.parameter) : qs(r.parameter) + QLatin1Char('\n') + qs(r.note);
    case Qt::TextAlignmentRole:
        if (index.column() != ParameterColumn && index.column() != NoteColumn && index.column() != ShapeColumn)
            return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        return {};
    case Qt::ForegroundRole:
        if (!r.note.empty() && (index.column() == NoteColumn || index.column() == ExpAvgColumn
                                || index.column() == ExpAvgSqColumn))
            return QBrush(problemColor(QGuiApplication::palette()));
        return {};
    }
    return {};
}

QVariant TrainingNormsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
        return {};
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case ExpAvgColumn:
            return tr("L2 norm of Adam's first moment (exp_avg): how far the parameter is still moving");
        case ExpAvgSqColumn:
            return tr("L2 norm of the square root of Adam's second moment (√Σ exp_avg_sq): the size of its recent "
                      "gradients");
        case StepColumn:
            return tr("The optimizer step of this parameter's state");
        case IndexColumn:
            return tr("The parameter's index in the optimizer (model.parameters() order)");
        }
        return {};
    }
    if (role != Qt::DisplayRole)
        return {};
    switch (section) {
    case ParameterColumn:
        return tr("Parameter");
    case IndexColumn:
        return tr("Index");
    case ShapeColumn:
        return tr("Shape");
    case StepColumn:
        return tr("Step");
    case ExpAvgColumn:
        return tr("‖exp_avg‖₂");
    case ExpAvgSqColumn:
        return tr("‖√exp_avg_sq‖₂");
    case NoteColumn:
        return tr("Note");
    }
    return {};
}

} // namespace tessera::ui
