// SPDX-License-Identifier: GPL-3.0-or-later
#include "driftgridmodel.h"

#include "coreconvert.h"
#include "models/difftablemodel.h"
#include "models/layerposition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

namespace tessera::ui {

namespace {
/// The columns in the order a layer computes them: attention, MLP, experts, norms, anything else.
int moduleGroup(const QString& module)
{
    // The attention block's own modules (its q_norm too), not post_attention_layernorm.
    const bool attention = module.startsWith(QLatin1String("self_attn.")) || module.startsWith(QLatin1String("self_attention."))
        || module.startsWith(QLatin1String("attention.")) || module.startsWith(QLatin1String("attn."));
    if (module.contains(QLatin1String("expert")) || module == QLatin1String("mlp.gate")
        || module.contains(QLatin1String("router")) || module.contains(QLatin1String("moe")))
        return 2;
    if (module.contains(QLatin1String("norm")) && !attention)
        return 3;
    if (attention)
        return 0;
    if (module.startsWith(QLatin1String("mlp.")))
        return 1;
    return 4;
}

/// Within a group, the usual modules in their usual order, before the others (in the model's order).
int modulePriority(const QString& module)
{
    static const QStringList known {
        QStringLiteral("self_attn.q_proj"),          QStringLiteral("self_attn.k_proj"),
        QStringLiteral("self_attn.v_proj"),          QStringLiteral("self_attn.qkv_proj"),
        QStringLiteral("self_attn.o_proj"),          QStringLiteral("mlp.gate_proj"),
        QStringLiteral("mlp.up_proj"),               QStringLiteral("mlp.gate_up_proj"),
        QStringLiteral("mlp.down_proj"),             QStringLiteral("mlp.gate"),
        QStringLiteral("mlp.experts.*.gate_proj"),   QStringLiteral("mlp.experts.*.up_proj"),
        QStringLiteral("mlp.experts.*.down_proj"),   QStringLiteral("input_layernorm"),
        QStringLiteral("post_attention_layernorm"),
    };
    const int at = static_cast<int>(known.indexOf(module));
    return at < 0 ? static_cast<int>(known.size()) : at;
}

/// The module of a layer's tensor: its name after the layer's number, without ".weight".
QString moduleKey(const QString& module)
{
    for (const QLatin1String suffix : { QLatin1String(".weight"), QLatin1String(".weight*") })
        if (module.endsWith(suffix))
            return module.chopped(suffix.size());
    return module;
}

/// The name of a tensor outside the layers without its usual prefix and ".weight": "lm_head", "embed_tokens".
QString otherLabel(QString name)
{
    if (name.startsWith(QLatin1String("model.")))
        name.remove(0, 6);
    if (name.endsWith(QLatin1String(".weight")))
        name.chop(7);
    return name;
}
} // namespace

DriftGridModel::DriftGridModel(QObject* parent) : QAbstractTableModel(parent) { }

DriftGridModel::~DriftGridModel() = default;

void DriftGridModel::setDrift(DriftPtr drift)
{
    beginResetModel();
    m_drift = std::move(drift);
    build();
    // The last step by default: where a run is now.
    m_step = m_drift && m_drift->stepCount() ? static_cast<int>(m_drift->stepCount()) - 1 : 0;
    endResetModel();
}

void DriftGridModel::clear() { setDrift(nullptr); }

void DriftGridModel::setStep(int step)
{
    if (!m_drift || step < 0 || std::size_t(step) >= m_drift->stepCount() || step == m_step)
        return;
    m_step = step;
    if (rowCount() > 0 && columnCount() > 0)
        Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
    Q_EMIT headerDataChanged(Qt::Horizontal, 0, columnCount() - 1);
}

QString DriftGridModel::moduleLabel(const QString& module)
{
    QString label = module;
    const bool bias = label.endsWith(QLatin1String(".bias"));
    if (bias)
        label.chop(5);
    if (label == QLatin1String("mlp.gate"))
        label = QStringLiteral("router");
    else if (label == QLatin1String("input_layernorm"))
        label = QStringLiteral("in norm");
    else if (label == QLatin1String("post_attention_layernorm"))
        label = QStringLiteral("post norm");
    for (const QLatin1String prefix : { QLatin1String("self_attn."), QLatin1String("self_attention."),
                                        QLatin1String("attention."), QLatin1String("mlp."),
                                        QLatin1String("block_sparse_moe.") })
        if (label.startsWith(prefix))
            label.remove(0, prefix.size());
    label.replace(QLatin1String(".*."), QLatin1String("."));
    label.replace(QLatin1String("_proj"), QString());
    label.replace(QLatin1String("_layernorm"), QLatin1String(" norm"));
    label.replace(QLatin1Char('.'), QLatin1Char(' '));
    return bias ? label + QStringLiteral(" bias") : label;
}

void DriftGridModel::build()
{
    m_layers.clear();
    m_modules.clear();
    m_cells.clear();
    m_cellOfTensor.clear();
    m_values.clear();
    m_columns = 0;
    if (!m_drift)
        return;
    const auto& tensors = m_drift->report().tensors;
    struct Placed {
        int tensor;
        std::pair<bool, qlonglong> layer;
        QString module;
    };
    std::vector<Placed> placed;
    std::vector<int> others;
    std::map<QString, int> appearance;
    for (std::size_t t = 0; t < tensors.size(); ++t) {
        const LayerPosition position = layerPosition(qs(tensors[t]));
        if (position.layer < 0 || position.module.isEmpty()) {
            others.push_back(static_cast<int>(t));
            continue;
        }
        Placed p { static_cast<int>(t), { position.vision, position.layer }, moduleKey(position.module) };
        appearance.emplace(p.module, static_cast<int>(appearance.size()));
        if (std::find(m_layers.begin(), m_layers.end(), p.layer) == m_layers.end())
            m_layers.push_back(p.layer);
        placed.push_back(std::move(p));
    }
    std::sort(m_layers.begin(), m_layers.end());
    for (const auto& [module, order] : appearance)
        m_modules.push_back(module);
    std::sort(m_modules.begin(), m_modules.end(), [&](const QString& a, const QString& b) {
        return std::make_tuple(moduleGroup(a), modulePriority(a), appearance[a])
            < std::make_tuple(moduleGroup(b), modulePriority(b), appearance[b]);
    });
    // The tensors outside the layers wrap over the columns; without layers, in rows of at most six.
    m_columns = !m_modules.empty() ? static_cast<int>(m_modules.size())
                                   : static_cast<int>(std::clamp<std::size_t>(others.size(), 1, 6));
    const int otherRows = static_cast<int>((others.size() + std::size_t(m_columns) - 1) / std::size_t(m_columns));
    m_cells.resize(std::size_t((static_cast<int>(m_layers.size()) + otherRows) * m_columns));
    m_cellOfTensor.assign(tensors.size(), -1);
    for (const auto& p : placed) {
        const int row = static_cast<int>(std::find(m_layers.begin(), m_layers.end(), p.layer) - m_layers.begin());
        const int column = static_cast<int>(std::find(m_modules.begin(), m_modules.end(), p.module) - m_modules.begin());
        const int cell = row * m_columns + column;
        m_cells[std::size_t(cell)].push_back(p.tensor);
        m_cellOfTensor[std::size_t(p.tensor)] = cell;
    }
    for (std::size_t i = 0; i < others.size(); ++i) {
        const int cell = static_cast<int>(m_layers.size()) * m_columns + static_cast<int>(i);
        m_cells[std::size_t(cell)].push_back(others[i]);
        m_cellOfTensor[std::size_t(others[i])] = cell;
    }
    // Every step's cells at once: moving the step slider only repaints.
    m_values.assign(m_drift->stepCount(), std::vector<CellValue>(m_cells.size()));
    for (std::size_t s = 0; s < m_drift->stepCount(); ++s)
        for (std::size_t c = 0; c < m_cells.size(); ++c) {
            CellValue& v = m_values[s][c];
            bool worstNonFinite = false;
            for (const int t : m_cells[c]) {
                const auto* r = m_drift->record(std::size_t(t), s);
                if (!r)
                    continue;
                v.nan += r->nan;
                v.inf += r->inf;
                const bool larger = r->relativeChange && (!v.change || *r->relativeChange > *v.change);
                if (larger)
                    v.change = r->relativeChange;
                if (v.worst < 0 || (r->nonFinite() && !worstNonFinite) || (larger && !worstNonFinite)) {
                    v.worst = t;
                    worstNonFinite = r->nonFinite();
                }
            }
        }
}

QModelIndex DriftGridModel::indexOfTensor(const QString& tensor) const
{
    const int t = m_drift ? m_drift->tensorIndex(tensor.toStdString()) : -1;
    if (t < 0 || m_columns == 0)
        return {};
    const int cell = m_cellOfTensor[std::size_t(t)];
    return index(cell / m_columns, cell % m_columns);
}

std::optional<std::pair<double, double>> DriftGridModel::changeRange() const
{
    std::optional<std::pair<double, double>> range;
    for (const auto& step : m_values)
        for (const auto& v : step)
            if (v.change && *v.change > 0 && std::isfinite(*v.change))
                range = range ? std::make_pair(std::min(range->first, *v.change), std::max(range->second, *v.change))
                              : std::make_pair(*v.change, *v.change);
    return range;
}

int DriftGridModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || m_columns == 0 ? 0 : static_cast<int>(m_cells.size()) / m_columns;
}

int DriftGridModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : m_columns; }

const DriftGridModel::CellValue* DriftGridModel::value(const QModelIndex& index) const
{
    if (!m_drift || std::size_t(m_step) >= m_values.size())
        return nullptr;
    const auto cell = std::size_t(cellOf(index.row(), index.column()));
    return m_cells[cell].empty() ? nullptr : &m_values[std::size_t(m_step)][cell];
}

QVariant DriftGridModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& tensors = m_cells[std::size_t(cellOf(index.row(), index.column()))];
    const CellValue* v = value(index);
    if (!v)
        return {};
    const auto& report = m_drift->report();
    const auto* worst = v->worst >= 0 ? m_drift->record(std::size_t(v->worst), std::size_t(m_step)) : nullptr;
    switch (role) {
    case Qt::DisplayRole: {
        if (!worst)
            return QString();
        if (v->nan + v->inf || !v->change) {
            tessera::DriftRecord sum; // the cell as one record: its NaN and Inf
            sum.nan = v->nan;
            sum.inf = v->inf;
            return DriftTableModel::changeText(sum);
        }
        return DriftTableModel::changeNumber(*v->change, 2);
    }
    case Qt::ToolTipRole: {
        if (tensors.size() == 1)
            return worst ? DriftTableModel::recordToolTip(*worst)
                         : tr("%1 is not saved at step %2").arg(qs(report.tensors[std::size_t(tensors[0])]))
                               .arg(report.steps[std::size_t(m_step)].step);
        QString text = tr("%1 · %2: %3 tensors at step %4")
                           .arg(headerData(index.row(), Qt::Vertical).toString(),
                                headerData(index.column(), Qt::Horizontal).toString())
                           .arg(tensors.size())
                           .arg(report.steps[std::size_t(m_step)].step);
        if (v->change)
            text += QLatin1Char('\n') + tr("largest relative change %1").arg(DiffTableModel::numberText(*v->change));
        if (v->nan + v->inf)
            text += QLatin1Char('\n') + tr("NaN %1, Inf %2 in all").arg(v->nan).arg(v->inf);
        if (worst)
            text += QLatin1Char('\n') + tr("worst: %1").arg(qs(worst->name));
        return text;
    }
    case RelativeChangeRole:
        return v->change ? QVariant(*v->change) : QVariant();
    case NanCountRole:
        return qulonglong(v->nan);
    case InfCountRole:
        return qulonglong(v->inf);
    case NonFiniteRole:
        return v->nan + v->inf > 0;
    case StepRole:
        return qlonglong(report.steps[std::size_t(m_step)].step);
    case TensorNameRole:
        return qs(report.tensors[std::size_t(v->worst >= 0 ? v->worst : tensors.front())]);
    case CellTensorsRole: {
        QStringList names;
        for (const int t : tensors)
            names << qs(report.tensors[std::size_t(t)]);
        return names;
    }
    case CellLabelRole:
        return index.row() >= firstOtherRow() ? otherLabel(qs(report.tensors[std::size_t(tensors.front())])) : QString();
    case SortRole:
        return v->nan + v->inf ? std::numeric_limits<double>::infinity() : v->change.value_or(-1.0);
    case NormRole:
    case MaxAbsChangeRole:
    case WhyRole:
    case ProblemRole:
        return worst && tensors.size() == 1 ? driftRecordData(*worst, role) : QVariant();
    }
    return {};
}

QVariant DriftGridModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation == Qt::Horizontal) {
        if (section < 0 || section >= columnCount() || std::size_t(section) >= m_modules.size())
            return {};
        const QString& module = m_modules[std::size_t(section)];
        if (role == Qt::DisplayRole)
            return moduleLabel(module);
        if (role == Qt::ToolTipRole)
            return module.contains(QLatin1Char('*')) ? tr("%1: the largest change over every expert").arg(module)
                                                     : module;
        return {};
    }
    if (section < 0 || section >= rowCount() || role != Qt::DisplayRole)
        return {};
    if (section >= firstOtherRow())
        return tr("other");
    const auto& [vision, layer] = m_layers[std::size_t(section)];
    return vision ? tr("vision %1").arg(layer) : QString::number(layer);
}

} // namespace tessera::ui
