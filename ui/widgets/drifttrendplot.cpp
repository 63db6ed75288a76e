// SPDX-License-Identifier: GPL-3.0-or-later
#include "drifttrendplot.h"

#include "models/drifttablemodel.h"
#include "plots/plotstyle.h"
#include "widgets/rankcolors.h"

#include <QEvent>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::ui {

namespace {
const QColor kNormColor(0x1f, 0x77, 0xb4);
const QColor kChangeColor(0xe3, 0x6c, 0x0a);
} // namespace

DriftTrendPlot::DriftTrendPlot(QWidget* parent) : QCustomPlot(parent), m_title(new QCPTextElement(this, QString()))
{
    setMinimumSize(240, 150);
    QFont bold = font();
    bold.setBold(true);
    m_title->setFont(bold);
    plotLayout()->insertRow(0);
    plotLayout()->addElement(0, 0, m_title);
    plotLayout()->setRowStretchFactor(0, 0.001);
    addGraph(xAxis, yAxis)->setName(tr("‖W‖"));
    addGraph(xAxis, yAxis2)->setName(tr("‖ΔW‖ / ‖W‖ (log)"));
    yAxis2->setVisible(true);
    yAxis2->setScaleType(QCPAxis::stLogarithmic);
    yAxis2->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    yAxis2->setNumberFormat(QStringLiteral("eb"));
    yAxis2->setNumberPrecision(0);
    xAxis->setLabel(tr("step"));
    yAxis->setLabel(tr("‖W‖"));
    yAxis2->setLabel(tr("relative change"));
    // The legend in a line of its own under the title, so it never covers the lines.
    legend->setVisible(true);
    axisRect()->insetLayout()->take(legend);
    legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    auto* legendRow = new QCPLayoutGrid;
    plotLayout()->insertRow(1);
    plotLayout()->addElement(1, 0, legendRow);
    legendRow->addElement(0, 0, legend);
    legendRow->setMargins(QMargins(0, 0, 0, 0));
    plotLayout()->setRowStretchFactor(1, 0.001);
    applyPalette();
    redraw();
}

DriftTrendPlot::~DriftTrendPlot() = default;

void DriftTrendPlot::setTensor(const DriftTableModel* model, int row)
{
    m_model = model;
    m_row = model && row >= 0 && row < model->rowCount() ? row : -1;
    m_tensor = m_row >= 0 ? model->index(m_row, DriftTableModel::TensorColumn).data().toString() : QString();
    redraw();
}

void DriftTrendPlot::markStep(int step)
{
    m_step = step;
    redraw();
}

void DriftTrendPlot::showTitle()
{
    const QString text = m_tensor.isEmpty() ? tr("Select a tensor (a row or a heatmap cell)") : m_tensor;
    m_title->setText(QFontMetrics(m_title->font()).elidedText(text, Qt::ElideMiddle, std::max(80, width() - 16)));
}

void DriftTrendPlot::resizeEvent(QResizeEvent* event)
{
    showTitle();
    QCustomPlot::resizeEvent(event);
}

void DriftTrendPlot::redraw()
{
    clearItems();
    m_nonFiniteMarks = 0;
    graph(0)->data()->clear();
    graph(1)->data()->clear();
    showTitle();
    if (!m_model || m_row < 0) {
        replot(rpQueuedReplot);
        return;
    }
    const int steps = m_model->columnCount() - DriftTableModel::FirstStepColumn;
    double first = std::numeric_limits<double>::max();
    double last = std::numeric_limits<double>::lowest();
    const QColor problem = problemColor(palette());
    for (int s = 0; s < steps; ++s) {
        const QModelIndex index = m_model->index(m_row, DriftTableModel::columnOfStep(s));
        const double step = double(index.data(StepRole).toLongLong());
        first = std::min(first, step);
        last = std::max(last, step);
        if (const QVariant norm = index.data(NormRole); norm.isValid())
            graph(0)->addData(step, norm.toDouble());
        const QVariant change = index.data(RelativeChangeRole);
        if (change.isValid() && change.toDouble() > 0)
            graph(1)->addData(step, change.toDouble());
        if (index.data(NonFiniteRole).toBool()) {
            auto* line = new QCPItemStraightLine(this);
            line->point1->setCoords(step, 0);
            line->point2->setCoords(step, 1);
            line->setPen(QPen(problem, 2, Qt::DashLine));
            auto* text = new QCPItemText(this);
            text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
            text->position->setCoords(step, 0.02);
            text->setPositionAlignment(Qt::AlignTop | Qt::AlignHCenter);
            text->setText(index.data(Qt::DisplayRole).toString());
            text->setColor(problem);
            text->setBrush(palette().color(QPalette::Base));
            QFont bold = font();
            bold.setBold(true);
            text->setFont(bold);
            ++m_nonFiniteMarks;
        }
        if (s == m_step) {
            auto* marker = new QCPItemStraightLine(this);
            marker->point1->setCoords(step, 0);
            marker->point2->setCoords(step, 1);
            QColor shown = palette().color(QPalette::Highlight);
            shown.setAlpha(160);
            marker->setPen(QPen(shown, 1.5, Qt::DashLine)); // the step the heatmap shows
        }
    }
    const double pad = std::max(1.0, (last - first) * 0.08); // room for a NaN label on the last step
    xAxis->setRange(first - pad, last + pad);
    bool found = false;
    QCPRange norms = graph(0)->getValueRange(found);
    if (found)
        yAxis->setRange(norms.lower == norms.upper ? QCPRange(norms.lower * 0.9 - 1e-12, norms.upper * 1.1 + 1e-12)
                                                   : QCPRange(norms.lower - norms.size() * 0.1, norms.upper + norms.size() * 0.1));
    // Whole decades with room around the points, so the logarithmic ticks are round numbers however little the
    // change varies.
    QCPRange changes = graph(1)->getValueRange(found);
    if (found)
        yAxis2->setRange(std::pow(10.0, std::floor(std::log10(changes.lower / 2))),
                         std::pow(10.0, std::ceil(std::log10(changes.upper * 2))));
    replot(); // at once, as the heatmap beside it (a grab of the window shows both as they are)
}

void DriftTrendPlot::changeEvent(QEvent* event)
{
    QCustomPlot::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        applyPalette();
        redraw();
    }
}

void DriftTrendPlot::applyPalette()
{
    const QPalette pal = palette();
    setBackground(pal.color(QPalette::Base));
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    styleAxes(axisRect(), pal, small);
    m_title->setTextColor(pal.color(QPalette::Text));
    legend->setBrush(pal.color(QPalette::Base));
    legend->setTextColor(pal.color(QPalette::Text));
    legend->setBorderPen(QPen(pal.color(QPalette::Mid)));
    legend->setFont(small);
    const QColor colors[] = { kNormColor, kChangeColor };
    for (int g = 0; g < 2; ++g) {
        graph(g)->setPen(QPen(colors[g], 2));
        graph(g)->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, colors[g], colors[g], 6));
    }
    graph(1)->setPen(QPen(kChangeColor, 2, Qt::DashLine));
}

} // namespace tessera::ui
