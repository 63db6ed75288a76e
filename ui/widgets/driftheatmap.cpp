// SPDX-License-Identifier: GPL-3.0-or-later
#include "driftheatmap.h"

#include "models/driftgridmodel.h"
#include "plots/plotstyle.h"
#include "widgets/rankcolors.h"

#include <QEvent>
#include <QHelpEvent>
#include <QToolTip>

#include <cmath>

namespace tessera::ui {

namespace {
/// Viridis: dark for the smallest change, yellow for the largest; no red in it, so NaN and Inf stand out. A cell
/// without a change (the first step, a tensor new at this step) is light grey.
QCPColorGradient changeGradient()
{
    QCPColorGradient g = colorGradient({ { 0.0, QColor(0x44, 0x01, 0x54) },
                                         { 0.25, QColor(0x3b, 0x52, 0x8b) },
                                         { 0.5, QColor(0x21, 0x91, 0x8c) },
                                         { 0.75, QColor(0x5e, 0xc9, 0x62) },
                                         { 1.0, QColor(0xfd, 0xe7, 0x25) } });
    g.setNanColor(QColor(0xd8, 0xd8, 0xd8));
    return g;
}
} // namespace

DriftHeatmap::DriftHeatmap(QWidget* parent)
    : QCustomPlot(parent)
    , m_map(new QCPColorMap(xAxis, yAxis))
    , m_scale(new QCPColorScale(this))
    , m_title(new QCPTextElement(this, QString()))
{
    setMinimumSize(260, 200);
    QFont bold = font();
    bold.setBold(true);
    m_title->setFont(bold);
    plotLayout()->insertRow(0);
    plotLayout()->addElement(0, 0, m_title);
    plotLayout()->addElement(1, 1, m_scale);
    plotLayout()->setRowStretchFactor(0, 0.001);
    auto* margins = new QCPMarginGroup(this);
    axisRect()->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
    m_scale->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
    m_scale->setBarWidth(10);
    m_scale->setDataScaleType(QCPAxis::stLogarithmic);
    setScaleTicks(true);
    m_scale->axis()->setLabel(tr("‖ΔW‖ / ‖W‖"));
    m_map->setInterpolate(false);
    m_map->setColorScale(m_scale);
    m_map->setGradient(changeGradient());
    m_map->setDataScaleType(QCPAxis::stLogarithmic);
    yAxis->setRangeReversed(true); // layer 0 at the top, as a model reads
    for (auto* axis : { xAxis, yAxis }) {
        axis->setTicker(QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText));
        axis->setSubTicks(false);
        axis->setTickLength(0, 4); // outside: a tick inside would stand in the first cell's label
        axis->grid()->setVisible(false);
    }
    yAxis->setLabel(tr("layer"));
    connect(this, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) { m_pressedAt = event->pos(); });
    connect(this, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* event) {
        if ((event->pos() - m_pressedAt).manhattanLength() > 4 || event->button() != Qt::LeftButton)
            return;
        if (const QModelIndex index = cellAt(event->position()); index.isValid())
            Q_EMIT cellClicked(index);
    });
    applyPalette();
}

DriftHeatmap::~DriftHeatmap() = default;

void DriftHeatmap::setModel(DriftGridModel* model)
{
    if (m_model)
        disconnect(m_model, nullptr, this, nullptr);
    m_model = model;
    if (m_model) {
        connect(m_model, &QAbstractItemModel::modelReset, this, &DriftHeatmap::rebuild);
        connect(m_model, &QAbstractItemModel::dataChanged, this, &DriftHeatmap::refill);
    }
    rebuild();
}

QString DriftHeatmap::title() const { return m_title->text(); }

void DriftHeatmap::rebuild()
{
    const int rows = m_model ? m_model->rowCount() : 0;
    const int columns = m_model ? m_model->columnCount() : 0;
    m_map->data()->setSize(std::max(columns, 1), std::max(rows, 1));
    m_map->data()->setRange(QCPRange(0, std::max(columns - 1, 0)), QCPRange(0, std::max(rows - 1, 0)));
    xAxis->setRange(-0.5, std::max(columns, 1) - 0.5);
    yAxis->setRange(-0.5, std::max(rows, 1) - 0.5);
    // One scale for every step, so moving between steps compares colours.
    const auto range = m_model ? m_model->changeRange() : std::nullopt;
    double lower = range ? range->first : 1e-6;
    double upper = range ? range->second : 1.0;
    if (upper <= lower * 1.0001) {
        lower /= 10;
        upper *= 10;
    }
    m_map->setDataRange(QCPRange(lower, upper));
    setScaleTicks(upper >= lower * 10);
    refill();
}

void DriftHeatmap::setScaleTicks(bool decades)
{
    // Powers of ten label a scale over decades; within one decade they would all read 10⁰, so plain numbers do.
    const bool logTicks = !m_scale->axis()->ticker().dynamicCast<QCPAxisTickerLog>().isNull();
    if (decades == logTicks)
        return;
    if (decades)
        m_scale->axis()->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    else
        m_scale->axis()->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    m_scale->axis()->setNumberFormat(decades ? QStringLiteral("eb") : QStringLiteral("g"));
    m_scale->axis()->setNumberPrecision(decades ? 0 : 3);
}

void DriftHeatmap::refill()
{
    clearItems();
    m_nonFiniteMarks = 0;
    const int rows = m_model ? m_model->rowCount() : 0;
    const int columns = m_model ? m_model->columnCount() : 0;
    m_scale->setVisible(rows > 0);
    if (rows == 0 || columns == 0) {
        m_map->data()->fill(std::nan(""));
        m_map->data()->fillAlpha(0);
        m_title->setText(QString());
        replot(rpQueuedReplot);
        return;
    }
    const auto& steps = m_model->drift()->report().steps;
    const auto step = std::size_t(m_model->step());
    m_title->setText(step > 0 ? tr("Relative change at step %1 (vs %2)").arg(steps[step].step).arg(steps[step - 1].step)
                              : tr("Step %1, the first: NaN and Inf only").arg(steps[step].step));
    fillCells();
    const int widest = setTicks();
    replot(rpImmediateRefresh); // lays the axes out: the cells' sizes in pixels follow
    const QSizeF cell(std::abs(xAxis->coordToPixel(1) - xAxis->coordToPixel(0)),
                      std::abs(yAxis->coordToPixel(1) - yAxis->coordToPixel(0)));
    xAxis->setTickLabelRotation(widest + 6 > cell.width() ? -40 : 0);
    drawSeparators();
    labelCells(cell);
    replot(); // at once: the buffer drawn above has no marks yet, and a grab of the window must not show it
}

void DriftHeatmap::fillCells()
{
    const double lower = m_map->dataRange().lower;
    for (int r = 0; r < m_model->rowCount(); ++r)
        for (int c = 0; c < m_model->columnCount(); ++c) {
            const QModelIndex index = m_model->index(r, c);
            const bool empty = index.data(DriftGridModel::CellTensorsRole).toStringList().isEmpty();
            const QVariant change = index.data(RelativeChangeRole);
            const bool nonFinite = index.data(NonFiniteRole).toBool();
            // A change of 0 (a frozen tensor) is the scale's lowest colour: a log scale has no 0. An empty cell
            // (no tensor there) is transparent: a value, since the NaN colour ignores the alpha.
            const double value = empty ? lower
                : change.isValid() && !nonFinite ? std::max(change.toDouble(), lower)
                                                 : std::nan("");
            m_map->data()->setCell(c, r, value);
            m_map->data()->setAlpha(c, r, empty ? 0 : 255);
        }
}

int DriftHeatmap::setTicks()
{
    // Every row's label, or every n-th when they would overlap; the "other" rows always.
    auto* rowTicks = static_cast<QCPAxisTickerText*>(yAxis->ticker().data());
    auto* columnTicks = static_cast<QCPAxisTickerText*>(xAxis->ticker().data());
    rowTicks->clear();
    columnTicks->clear();
    const int rows = m_model->rowCount();
    const QFontMetrics metrics(yAxis->tickLabelFont());
    const int every = std::max(1, int(std::ceil(rows * metrics.height() * 1.1 / std::max(1, axisRect()->height()))));
    for (int r = 0; r < rows; ++r)
        if (r % every == 0 || r >= m_model->firstOtherRow())
            rowTicks->addTick(r, m_model->headerData(r, Qt::Vertical).toString());
    int widest = 0;
    for (int c = 0; c < m_model->columnCount(); ++c) {
        const QString label = m_model->headerData(c, Qt::Horizontal).toString();
        columnTicks->addTick(c, label);
        widest = std::max(widest, metrics.horizontalAdvance(label));
    }
    return widest;
}

void DriftHeatmap::drawSeparators()
{
    // Thin lines between the cells, so neighbours of one colour still read as cells; a wider one above "other".
    const QColor base = palette().color(QPalette::Base);
    for (int r = 1; r < m_model->rowCount(); ++r) {
        auto* line = new QCPItemStraightLine(this);
        line->point1->setCoords(0, r - 0.5);
        line->point2->setCoords(1, r - 0.5);
        line->setPen(QPen(base, r == m_model->firstOtherRow() ? 4 : 1));
    }
    for (int c = 1; c < m_model->columnCount(); ++c) {
        auto* line = new QCPItemStraightLine(this);
        line->point1->setCoords(c - 0.5, 0);
        line->point2->setCoords(c - 0.5, 1);
        line->setPen(QPen(base, 1));
    }
}

void DriftHeatmap::labelCells(const QSizeF& cell)
{
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    QFont bold = small;
    bold.setBold(true);
    const QFontMetrics metrics(small);
    const int room = std::max(0, int(cell.width()) - 4);
    // Every cell's value or none: a few numbers missing would look like missing values.
    int widestValue = 0;
    for (int r = 0; r < m_model->rowCount(); ++r)
        for (int c = 0; c < m_model->columnCount(); ++c)
            if (const QModelIndex index = m_model->index(r, c); !index.data(NonFiniteRole).toBool())
                widestValue = std::max(widestValue, metrics.horizontalAdvance(index.data(Qt::DisplayRole).toString()));
    const bool values = cell.height() >= metrics.height() * 1.2 && widestValue <= room;
    const QColor problem = problemColor(palette());
    QCPColorGradient gradient = m_map->gradient();
    for (int r = 0; r < m_model->rowCount(); ++r)
        for (int c = 0; c < m_model->columnCount(); ++c) {
            const QModelIndex index = m_model->index(r, c);
            if (index.data(DriftGridModel::CellTensorsRole).toStringList().isEmpty())
                continue;
            const bool nonFinite = index.data(NonFiniteRole).toBool();
            if (nonFinite) {
                auto* mark = new QCPItemRect(this);
                mark->topLeft->setCoords(c - 0.5, r - 0.5);
                mark->bottomRight->setCoords(c + 0.5, r + 0.5);
                mark->setPen(QPen(problem, 2));
                mark->setBrush(QBrush(problem, Qt::BDiagPattern));
                ++m_nonFiniteMarks;
            }
            // The value when every value fits, a label ("lm_head") elided to the cell, NaN and Inf always.
            QStringList lines;
            if (const QString label = index.data(DriftGridModel::CellLabelRole).toString(); !label.isEmpty())
                lines << metrics.elidedText(label, Qt::ElideRight, room);
            QString value = index.data(Qt::DisplayRole).toString();
            if (nonFinite && metrics.horizontalAdvance(value) > room)
                value = index.data(NanCountRole).toULongLong() ? QStringLiteral("NaN") : QStringLiteral("Inf");
            if (!value.isEmpty() && (nonFinite || values))
                lines << value;
            if (lines.size() == 2 && cell.height() < metrics.height() * 2.1)
                lines.removeAt(nonFinite ? 0 : 1);
            if (lines.join(QString()).isEmpty())
                continue;
            auto* text = new QCPItemText(this);
            text->position->setCoords(c, r);
            text->setText(lines.join(QLatin1Char('\n')));
            text->setFont(nonFinite ? bold : small);
            const QVariant change = index.data(RelativeChangeRole);
            const QColor background = change.isValid() && !nonFinite
                ? QColor(gradient.color(std::max(change.toDouble(), m_map->dataRange().lower), m_map->dataRange(), true))
                : gradient.nanColor();
            text->setColor(nonFinite ? problem : textColorOn(background));
            if (nonFinite) {
                text->setBrush(QColor(255, 255, 255, 220));
                text->setPadding(QMargins(2, 0, 2, 0));
            }
        }
}

QModelIndex DriftHeatmap::cellAt(const QPointF& pos) const
{
    if (!m_model || !axisRect()->rect().contains(pos.toPoint()))
        return {};
    const int c = qRound(xAxis->pixelToCoord(pos.x()));
    const int r = qRound(yAxis->pixelToCoord(pos.y()));
    const QModelIndex index = m_model->index(r, c);
    if (!index.isValid() || index.data(DriftGridModel::CellTensorsRole).toStringList().isEmpty())
        return {};
    return index;
}

QPoint DriftHeatmap::cellCenter(const QModelIndex& index) const
{
    return QPointF(xAxis->coordToPixel(index.column()), yAxis->coordToPixel(index.row())).toPoint();
}

bool DriftHeatmap::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QModelIndex index = cellAt(help->pos());
        const QString text = index.isValid() ? index.data(Qt::ToolTipRole).toString() : QString();
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), text, this);
        return true;
    }
    return QCustomPlot::event(event);
}

void DriftHeatmap::changeEvent(QEvent* event)
{
    QCustomPlot::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        applyPalette();
        refill();
    }
}

void DriftHeatmap::resizeEvent(QResizeEvent* event)
{
    QCustomPlot::resizeEvent(event);
    // The labels that fit the cells depend on their size in pixels.
    if (m_model && m_model->rowCount() > 0)
        QMetaObject::invokeMethod(this, &DriftHeatmap::refill, Qt::QueuedConnection);
}

void DriftHeatmap::applyPalette()
{
    const QPalette pal = palette();
    setBackground(pal.color(QPalette::Base));
    axisRect()->setBackground(pal.color(QPalette::Base));
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    styleAxes(axisRect(), pal, small);
    m_title->setTextColor(pal.color(QPalette::Text));
    m_scale->axis()->setTickLabelColor(pal.color(QPalette::Text));
    m_scale->axis()->setLabelColor(pal.color(QPalette::Text));
    m_scale->axis()->setTickLabelFont(small);
    m_scale->axis()->setLabelFont(small);
    m_scale->axis()->setBasePen(QPen(pal.color(QPalette::Mid)));
    m_scale->axis()->setTickPen(QPen(pal.color(QPalette::Mid)));
}

} // namespace tessera::ui
