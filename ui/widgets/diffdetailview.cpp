// SPDX-License-Identifier: GPL-3.0-or-later
#include "diffdetailview.h"

#include "coreconvert.h"
#include "models/difftablemodel.h"
#include "plots/plotexport.h"
#include "plots/plotstyle.h"
#include "plots/qcp.h"

#include <QEvent>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableWidget>

#include <algorithm>
#include <cmath>
#include <utility>

namespace tessera::ui {

using tessera::TensorDiff;
using tessera::TensorDiffDetail;

namespace {

const QColor kColorA(0x1f, 0x77, 0xb4);
const QColor kColorB(0xe3, 0x6c, 0x0a);
const QColor kColorDiff(0xc0, 0x2a, 0x2a);
const QColor kMissingColor(0x8e, 0x24, 0xaa); ///< elements a side lacks: neither a value nor NaN

QString num(double v) { return DiffTableModel::numberText(v); }
QString exact(double v) { return DiffTableModel::exactText(v); }

QString indexText(const tessera::Shape& index)
{
    QStringList parts;
    for (auto i : index)
        parts << QString::number(i);
    return QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
}

/// Blue – white – red, for signed values around 0 (weights).
QCPColorGradient divergingGradient()
{
    return colorGradient({ { 0.0, QColor(0x3b, 0x4c, 0xc0) },
                           { 0.25, QColor(0x8d, 0xb0, 0xfe) },
                           { 0.5, QColor(0xf4, 0xf4, 0xf4) },
                           { 0.75, QColor(0xf4, 0x98, 0x7a) },
                           { 1.0, QColor(0xb4, 0x04, 0x26) } });
}

/// White for 0, through yellow and orange to dark red, so one differing block stands out on an equal tensor.
QCPColorGradient magnitudeGradient()
{
    return colorGradient({ { 0.0, QColor(0xfb, 0xfb, 0xfb) },
                           { 0.02, QColor(0xff, 0xec, 0x9c) },
                           { 0.35, QColor(0xfd, 0x8d, 0x3c) },
                           { 0.7, QColor(0xd7, 0x30, 0x1f) },
                           { 1.0, QColor(0x67, 0x00, 0x0d) } });
}

QCustomPlot* makePlot(QWidget* parent)
{
    auto* plot = new QCustomPlot(parent);
    // Small enough that the statistics and both histograms fit the Diff page beside the tree at 1280 × 720.
    plot->setMinimumSize(190, 150);
    plot->setNoAntialiasingOnDrag(true);
    return plot;
}

} // namespace

DiffDetailView::DiffDetailView(QWidget* parent)
    : QWidget(parent)
    , m_title(new QLabel(this))
    , m_stats(new QLabel(this))
    , m_worst(new QTableWidget(this))
    , m_worstTitle(new QLabel(tr("Largest |a − b|"), this))
    , m_values(makePlot(this))
    , m_differences(makePlot(this))
    , m_heatmaps(makePlot(this))
    , m_heatmapNote(new QLabel(this))
{
    setUpTexts();
    setUpValuesPlot();
    setUpDifferencesPlot();
    setUpHeatmaps();
    layOut();
    applyPalette();
    showMessage(tr("Select a tensor to see its values, differences and worst elements."));
}

QFont DiffDetailView::boldFont() const
{
    QFont bold = font();
    bold.setBold(true);
    return bold;
}

/// The title, the statistics and the table of worst elements; each plot's save action.
void DiffDetailView::setUpTexts()
{
    m_title->setWordWrap(true);
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_stats->setTextFormat(Qt::RichText);
    m_stats->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_stats->setTextInteractionFlags(Qt::TextSelectableByMouse);
    // Each plot saves itself (right-click), named after the tensor it shows, which the saved file names above its
    // own title. The lambdas return QString: with QT_USE_QSTRINGBUILDER an `auto` return would be a builder
    // pointing at temporaries gone by the time the name is read.
    const std::pair<QCustomPlot*, const char*> plots[] = { { m_values, "values" },
                                                           { m_differences, "differences" },
                                                           { m_heatmaps, "heatmap" } };
    for (const auto& [plot, kind] : plots)
        addSavePlotAction(
            plot,
            [this, kind = QString::fromLatin1(kind)]() -> QString {
                return (m_name.isEmpty() ? QStringLiteral("tensor") : m_name) + QLatin1Char('-') + kind;
            },
            [this]() -> QString { return m_name; });
    m_worst->setColumnCount(5);
    m_worst->setHorizontalHeaderLabels({ tr("index"), tr("A"), tr("B"), tr("|a−b|"), tr("rel") });
    m_worst->verticalHeader()->setVisible(false);
    m_worst->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
    m_worst->horizontalHeader()->setStretchLastSection(true);
    m_worst->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_worst->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_worst->setAlternatingRowColors(true);
    // As wide as the statistics above it; in a narrow window the table scrolls, the plots beside it are never cut.
    m_worst->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.9);
    m_worst->setFont(small);
    m_heatmapNote->setWordWrap(true);
    m_heatmapNote->setFont(small);
    m_worstTitle->setFont(boldFont());
}

void DiffDetailView::setUpValuesPlot()
{
    const QFont bold = boldFont();
    m_values->addGraph();
    m_values->graph(0)->setName(tr("A"));
    m_values->addGraph();
    m_values->graph(1)->setName(tr("B"));
    m_values->legend->setVisible(true);
    m_values->xAxis->setLabel(tr("value"));
    m_values->yAxis->setLabel(tr("elements"));
    m_values->plotLayout()->insertRow(0);
    m_values->plotLayout()->addElement(0, 0, new QCPTextElement(m_values, tr("Values of A and B"), bold));
    // The legend in a line of its own under the title, so it never covers the bars.
    m_values->axisRect()->insetLayout()->take(m_values->legend);
    m_values->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    auto* legendRow = new QCPLayoutGrid;
    m_values->plotLayout()->insertRow(1);
    m_values->plotLayout()->addElement(1, 0, legendRow);
    legendRow->addElement(0, 0, m_values->legend);
    legendRow->setMargins(QMargins(0, 0, 0, 0));
    m_values->plotLayout()->setRowStretchFactor(1, 0.001);
    m_values->plotLayout()->simplify();
}

void DiffDetailView::setUpDifferencesPlot()
{
    const QFont bold = boldFont();
    m_differences->addGraph();
    m_differences->graph(0)->setName(tr("a − b"));
    m_differences->yAxis->setScaleType(QCPAxis::stLogarithmic);
    m_differences->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    m_differences->yAxis->setNumberFormat(QStringLiteral("eb"));
    m_differences->yAxis->setNumberPrecision(0);
    m_differences->xAxis->setLabel(tr("a − b"));
    m_differences->yAxis->setLabel(tr("elements (log)"));
    m_differences->plotLayout()->insertRow(0);
    m_differences->plotLayout()->addElement(0, 0, new QCPTextElement(m_differences, tr("Differences a − b"), bold));
}

void DiffDetailView::setUpHeatmaps()
{
    const QFont bold = boldFont();
    // Heatmaps: A and B share one colour scale, |A − B| has its own.
    // The five columns in a grid of their own, so a line added above them (a saved plot's caption) spans them all.
    m_heatmaps->plotLayout()->clear();
    auto* grid = new QCPLayoutGrid;
    m_heatmaps->plotLayout()->addElement(0, 0, grid);
    auto* margins = new QCPMarginGroup(m_heatmaps);
    const QString titles[] = { tr("A"), tr("B"), QString(), tr("|A − B|"), QString() };
    for (int c = 0; c < 5; ++c)
        grid->addElement(0, c, new QCPTextElement(m_heatmaps, titles[c], bold));
    QCPColorScale* scales[2];
    for (int i = 0; i < 2; ++i) {
        scales[i] = new QCPColorScale(m_heatmaps);
        scales[i]->setBarWidth(8);
        scales[i]->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
        scales[i]->setGradient(i == 0 ? divergingGradient() : magnitudeGradient());
    }
    const int rectColumns[] = { 0, 1, 3 };
    for (int i = 0; i < 3; ++i) {
        auto* rect = new QCPAxisRect(m_heatmaps);
        rect->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
        rect->axis(QCPAxis::atLeft)->setRangeReversed(true); // row 0 at the top, as a matrix reads
        if (i > 0)
            rect->axis(QCPAxis::atLeft)->setTickLabels(false);
        // A third of the window each: a few round ticks, so labels such as 150000 never run into each other.
        rect->axis(QCPAxis::atBottom)->ticker()->setTickCount(3);
        rect->axis(QCPAxis::atLeft)->ticker()->setTickCount(4);
        grid->addElement(1, rectColumns[i], rect);
        auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
        map->setInterpolate(false);
        map->setColorScale(scales[i == 2 ? 1 : 0]);
        m_maps << map;
        // Elements a side lacks (a missing or truncated rank) are painted over in one colour of their own: they
        // are neither values nor NaN.
        auto* missing = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
        missing->setInterpolate(false);
        QCPColorGradient solid;
        solid.clearColorStops();
        solid.setColorStopAt(0, kMissingColor);
        solid.setColorStopAt(1, kMissingColor);
        solid.setNanHandling(QCPColorGradient::nhTransparent);
        missing->setGradient(solid);
        missing->setDataRange(QCPRange(0, 1));
        m_missingMaps << missing;
    }
    // Rings around the worst elements on |A − B|: at 128 cells a single element is only a few pixels wide.
    auto* diffRect = m_heatmaps->axisRects().value(2);
    m_worstMarks = new QCPGraph(diffRect->axis(QCPAxis::atBottom), diffRect->axis(QCPAxis::atLeft));
    m_worstMarks->setLineStyle(QCPGraph::lsNone);
    m_worstMarks->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(QColor(0x20, 0x20, 0x20), 1.2),
                                                  Qt::NoBrush, 11));
    grid->addElement(1, 2, scales[0]);
    grid->addElement(1, 4, scales[1]);
    for (int c = 0; c < 5; ++c)
        grid->setColumnStretchFactor(c, c == 2 || c == 4 ? 0.01 : 1);
    grid->setRowStretchFactor(0, 0.01);
    m_heatmaps->setMinimumHeight(190);
}

void DiffDetailView::layOut()
{
    auto* layout = new QGridLayout(this);
    layout->setContentsMargins(0, 4, 0, 0);
    layout->setHorizontalSpacing(8);
    layout->setVerticalSpacing(4);
    layout->addWidget(m_title, 0, 0, 1, 3);
    // The statistics scroll when the window is short, rather than losing their last lines.
    auto* statsScroll = m_statsScroll = new QScrollArea(this);
    statsScroll->setWidget(m_stats);
    statsScroll->setWidgetResizable(true);
    statsScroll->setFrameShape(QFrame::NoFrame);
    statsScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    statsScroll->setMinimumWidth(m_stats->fontMetrics().horizontalAdvance(QStringLiteral("mean |a−b|  -0.0004176988  -0.0004176988")));
    // The statistics and the worst elements share the left column over both rows of plots: the statistics take
    // the height their lines need, the table the rest.
    auto* leftBox = m_leftBox = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(leftBox);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->setSpacing(2);
    leftLayout->addWidget(statsScroll);
    leftLayout->addSpacing(4);
    leftLayout->addWidget(m_worstTitle);
    leftLayout->addWidget(m_worst, 1);
    m_worst->setMinimumHeight(m_worst->fontMetrics().height() * 5);
    layout->addWidget(leftBox, 1, 0, 2, 1);
    layout->addWidget(m_values, 1, 1);
    layout->addWidget(m_differences, 1, 2);
    auto* heatBox = m_heatBox = new QWidget(this);
    auto* heatLayout = new QVBoxLayout(heatBox);
    heatLayout->setContentsMargins(0, 0, 0, 0);
    heatLayout->setSpacing(0);
    heatLayout->addWidget(m_heatmaps, 1);
    heatLayout->addWidget(m_heatmapNote);
    layout->addWidget(heatBox, 2, 1, 1, 2);
    layout->setColumnStretch(1, 1);
    layout->setColumnStretch(2, 1);
    layout->setRowStretch(1, 5);
    layout->setRowStretch(2, 6);
}

DiffDetailView::~DiffDetailView() = default;

void DiffDetailView::changeEvent(QEvent* event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange)
        applyPalette();
}

void DiffDetailView::applyPalette()
{
    const QPalette pal = palette();
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    for (auto* plot : { m_values, m_differences, m_heatmaps }) {
        plot->setBackground(pal.color(QPalette::Base));
        for (auto* rect : plot->axisRects())
            styleAxes(rect, pal, small);
        for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
            if (auto* text = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i)))
                text->setTextColor(pal.color(QPalette::Text));
        if (plot->legend) {
            plot->legend->setBrush(pal.color(QPalette::Base));
            plot->legend->setTextColor(pal.color(QPalette::Text));
            plot->legend->setBorderPen(QPen(pal.color(QPalette::Mid)));
            plot->legend->setFont(small);
        }
    }
    for (auto* element : m_heatmaps->plotLayout()->elements(true))
        if (auto* scale = qobject_cast<QCPColorScale*>(element))
            if (scale->axis()) {
                scale->axis()->setTickLabelColor(pal.color(QPalette::Text));
                scale->axis()->setTickLabelFont(small);
                scale->axis()->setBasePen(QPen(pal.color(QPalette::Mid)));
                scale->axis()->setTickPen(QPen(pal.color(QPalette::Mid)));
            }
    QColor fillA = kColorA;
    fillA.setAlpha(90);
    m_values->graph(0)->setPen(QPen(kColorA, 1.5));
    m_values->graph(0)->setBrush(fillA);
    m_values->graph(0)->setLineStyle(QCPGraph::lsStepCenter);
    m_values->graph(1)->setPen(QPen(kColorB, 1.5, Qt::DashLine));
    m_values->graph(1)->setLineStyle(QCPGraph::lsStepCenter);
    QColor fillD = kColorDiff;
    fillD.setAlpha(70);
    m_differences->graph(0)->setPen(QPen(kColorDiff, 1.5));
    m_differences->graph(0)->setBrush(fillD);
    m_differences->graph(0)->setLineStyle(QCPGraph::lsStepCenter);
    for (auto* plot : { m_values, m_differences, m_heatmaps })
        plot->replot(QCustomPlot::rpQueuedReplot);
}

void DiffDetailView::clearPlots()
{
    for (auto* plot : { m_values, m_differences })
        for (int i = 0; i < plot->graphCount(); ++i)
            plot->graph(i)->data()->clear();
    for (int i = 0; i < m_heatmaps->plottableCount(); ++i)
        if (auto* map = qobject_cast<QCPColorMap*>(m_heatmaps->plottable(i)))
            map->data()->clear();
    m_worstMarks->data()->clear();
    m_worst->setRowCount(0);
    m_heatmapNote->clear();
    for (auto* plot : { m_values, m_differences, m_heatmaps })
        plot->replot(QCustomPlot::rpQueuedReplot);
}

void DiffDetailView::showBody(bool statistics, bool plots)
{
    m_leftBox->setVisible(statistics);
    m_heatBox->setVisible(statistics);
    for (QWidget* plot : { static_cast<QWidget*>(m_values), static_cast<QWidget*>(m_differences),
                           static_cast<QWidget*>(m_heatmaps) })
        plot->setVisible(plots);
}

void DiffDetailView::showMessage(const QString& message)
{
    // Only the message: empty axes would look like a result.
    showBody(false, false);
    m_name.clear();
    m_title->setText(message);
    m_stats->clear();
    m_statsScroll->setMinimumHeight(0);
    clearPlots();
}

int DiffDetailView::worstRowCount() const { return m_worst->rowCount(); }

QString DiffDetailView::worstIndexText(int row) const
{
    auto* item = m_worst->item(row, 0);
    return item ? item->text() : QString();
}

QString DiffDetailView::statsHtml(const TensorDiff& t) const
{
    const QString muted = palette().color(QPalette::PlaceholderText).name();
    QString html = QStringLiteral("<table cellspacing='0' cellpadding='1'>"
                                  "<tr><td></td><td align='right'><b style='color:%1'>A</b></td>"
                                  "<td width='12'></td><td align='right'><b style='color:%2'>B</b></td></tr>")
                       .arg(kColorA.name(), kColorB.name());
    auto row = [&](const QString& label, const QString& a, const QString& b) {
        html += QStringLiteral("<tr><td style='color:%1'>%2&nbsp;&nbsp;</td><td align='right'>%3</td><td></td>"
                               "<td align='right'>%4</td></tr>")
                    .arg(muted, label, a, b);
    };
    row(tr("dtype"), dtypeText(t.dtypeA), dtypeText(t.dtypeB));
    if (t.numeric) {
        row(tr("min"), exact(t.a.min), exact(t.b.min));
        row(tr("max"), exact(t.a.max), exact(t.b.max));
        row(tr("mean"), exact(t.a.mean), exact(t.b.mean));
        row(tr("std"), exact(t.a.std), exact(t.b.std));
        row(tr("zeros"), QString::number(t.a.zeros), QString::number(t.b.zeros));
        row(tr("NaN"), QString::number(t.a.nan), QString::number(t.b.nan));
        row(tr("±Inf"), QString::number(t.a.inf), QString::number(t.b.inf));
    }
    if (t.missingA || t.missingB)
        row(QStringLiteral("<b style='color:%1'>%2</b>").arg(kMissingColor.name(), tr("missing")),
            QString::number(t.missingA), QString::number(t.missingB));
    html += QStringLiteral("<tr><td colspan='4' height='6'></td></tr>");
    auto pair = [&](const QString& label, const QString& value) {
        html += QStringLiteral("<tr><td style='color:%1'>%2&nbsp;&nbsp;</td><td colspan='3' align='right'>%3</td></tr>")
                    .arg(muted, label, value);
    };
    if (t.numeric) {
        QString at;
        if (t.worstIndex >= 0)
            at = tr(" at %1").arg(indexText(tessera::unflattenIndex(static_cast<std::uint64_t>(t.worstIndex), t.shapeA)));
        pair(tr("max |a−b|"), exact(t.maxAbsDiff) + at);
        pair(tr("mean |a−b|"), exact(t.meanAbsDiff));
        pair(tr("max rel"), exact(t.maxRelDiff));
        pair(tr("cosine"), DiffTableModel::cosineText(t.cosine));
    }
    // Of the elements both sides hold: those a side lacks are not compared, so they are no part of the share.
    const std::uint64_t compared = t.comparedElements();
    const double share = compared ? 100.0 * static_cast<double>(t.differing) / static_cast<double>(compared) : 0;
    pair(tr("differing"), tr("%1 of %2 (%3%)").arg(t.differing).arg(compared).arg(QString::number(share, 'g', 3)));
    pair(tr("outside tol."), QString::number(t.outsideTolerance));
    pair(tr("bytes equal"), t.bitEqual ? tr("yes") : tr("no"));
    html += QStringLiteral("</table>");
    return html;
}

QString DiffDetailView::titleText() const { return m_title->text(); }

void DiffDetailView::setDetail(const TensorDiffDetail& detail, bool updateView)
{
    const TensorDiff& t = detail.summary;
    m_name = qs(t.name);
    const bool ok = tessera::diffStatusOk(t.status);
    const bool update = updateView && (t.status == tessera::DiffStatus::Different || t.status == tessera::DiffStatus::WithinTolerance);
    const QString color = update ? QStringLiteral("#1f77b4") : ok ? QStringLiteral("#2e8b3e") : QStringLiteral("#d03030");
    QString title = QStringLiteral("<b>%1</b> &nbsp; <span style='color:%2'><b>%3</b></span> &nbsp; %4")
                        .arg(m_name.toHtmlEscaped(), color, DiffTableModel::statusText(t.status, updateView),
                             shapeText(t.shapeA));
    if (!t.detail.empty() && t.status != tessera::DiffStatus::Identical)
        title += QStringLiteral(" &nbsp;·&nbsp; ") + qs(t.detail).toHtmlEscaped();
    m_title->setText(title);
    showBody(true, t.numeric);
    m_stats->setText(statsHtml(t));
    // Every line shown: the window's detail area scrolls instead when it is shorter than that.
    m_statsScroll->setMinimumHeight(std::min(m_stats->sizeHint().height() + 4, 520));
    // Every column too: the plots beside the statistics give up width before a number is cut.
    m_statsScroll->setMinimumWidth(m_stats->sizeHint().width() + m_statsScroll->verticalScrollBar()->sizeHint().width());
    clearPlots();
    if (!t.numeric) {
        m_heatmapNote->setText(tr("%1 values are compared by their bytes only; there is nothing to plot.")
                                   .arg(dtypeText(t.dtypeA)));
        return;
    }
    plotHistograms(detail);
    plotHeatmaps(detail);
    m_worstTitle->setText(detail.worst.empty() ? tr("Largest |a − b|: no element differs")
                                               : tr("Largest |a − b| (%1 of %2 differing)")
                                                     .arg(detail.worst.size())
                                                     .arg(t.differing));
    m_worst->setRowCount(static_cast<int>(detail.worst.size()));
    for (int r = 0; r < static_cast<int>(detail.worst.size()); ++r) {
        const auto& e = detail.worst[static_cast<std::size_t>(r)];
        const QString cells[] = { indexText(e.index), exact(e.a), exact(e.b), exact(e.absDiff),
                                  std::isfinite(e.relDiff) ? QString::number(e.relDiff, 'g', 3) : num(e.relDiff) };
        for (int c = 0; c < 5; ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            item->setTextAlignment(c == 0 ? (Qt::AlignLeft | Qt::AlignVCenter) : (Qt::AlignRight | Qt::AlignVCenter));
            m_worst->setItem(r, c, item);
        }
    }
    m_worst->resizeColumnsToContents();
}

void DiffDetailView::plotHistograms(const TensorDiffDetail& detail)
{
    auto fill = [](QCPGraph* graph, const tessera::Histogram& h, bool logScale) {
        QVector<double> keys, values;
        keys.reserve(static_cast<int>(h.counts.size()));
        values.reserve(static_cast<int>(h.counts.size()));
        for (std::size_t i = 0; i < h.counts.size(); ++i) {
            keys << h.binCenter(i);
            // A log axis cannot show 0: empty bins become gaps.
            values << (logScale && h.counts[i] == 0 ? qQNaN() : h.counts[i]);
        }
        graph->setData(keys, values, true);
    };
    fill(m_values->graph(0), detail.valuesA, false);
    fill(m_values->graph(1), detail.valuesB, false);
    double peak = 1;
    for (const auto* h : { &detail.valuesA, &detail.valuesB })
        for (double c : h->counts)
            peak = std::max(peak, c);
    m_values->xAxis->setRange(detail.valuesA.lo, detail.valuesA.hi);
    m_values->yAxis->setRange(0, peak * 1.1);

    fill(m_differences->graph(0), detail.differences, true);
    double dpeak = 1;
    for (double c : detail.differences.counts)
        dpeak = std::max(dpeak, c);
    // One bin of margin, so the outermost bins (the largest differences) do not hide behind the axes.
    const double pad = detail.differences.binWidth();
    m_differences->xAxis->setRange(detail.differences.lo - pad, detail.differences.hi + pad);
    m_differences->yAxis->setRange(0.3, dpeak * 3);
    m_values->replot(QCustomPlot::rpQueuedReplot);
    m_differences->replot(QCustomPlot::rpQueuedReplot);
}

QSize DiffDetailView::heatmapCells() const
{
    for (int i = 0; i < m_heatmaps->plottableCount(); ++i)
        if (auto* map = qobject_cast<QCPColorMap*>(m_heatmaps->plottable(i)))
            return QSize(map->data()->keySize(), map->data()->valueSize());
    return {};
}

int DiffDetailView::missingCellCount(int map) const
{
    int count = 0;
    if (map < 0 || map >= m_missingMaps.size())
        return 0;
    auto* data = m_missingMaps[map]->data(); // QCPColorMapData::cell is not const
    for (int c = 0; c < data->keySize(); ++c)
        for (int r = 0; r < data->valueSize(); ++r)
            count += data->cell(c, r) == 1.0 ? 1 : 0;
    return count;
}

QString DiffDetailView::statsText() const { return m_stats->text(); }

void DiffDetailView::plotHeatmaps(const TensorDiffDetail& detail)
{
    const tessera::Heatmap& h = detail.heatmap;
    const QList<QCPColorMap*>& maps = m_maps;
    if (maps.size() != 3 || h.rows == 0 || h.cols == 0) {
        m_heatmapNote->setText(tr("Empty tensor: no heatmap."));
        return;
    }
    // Symmetric around 0 over both sides, so one colour means the same value in A and in B.
    double extent = 0, diffMax = 0;
    for (std::size_t i = 0; i < h.a.size(); ++i) {
        for (double v : { h.a[i], h.b[i] })
            if (std::isfinite(v))
                extent = std::max(extent, std::fabs(v));
        if (std::isfinite(h.absDiff[i]))
            diffMax = std::max(diffMax, h.absDiff[i]);
    }
    if (extent == 0)
        extent = 1;
    const double cellW = static_cast<double>(h.sourceCols) / h.cols;
    const double cellH = static_cast<double>(h.sourceRows) / h.rows;
    // QCustomPlot draws a colour map dimension of one cell with no extent (a 1-D tensor, one row, would be
    // blank), so such a dimension is drawn as two identical half cells.
    const int dataCols = h.cols == 1 ? 2 : h.cols;
    const int dataRows = h.rows == 1 ? 2 : h.rows;
    const double dataCellW = static_cast<double>(h.sourceCols) / dataCols;
    const double dataCellH = static_cast<double>(h.sourceRows) / dataRows;
    const std::vector<double>* sources[] = { &h.a, &h.b, &h.absDiff };
    // Each map paints only its own gaps: A where A holds none of a cell's elements, B likewise, |A − B| where
    // nothing was compared.
    const std::vector<std::uint8_t>* gaps[] = { &h.missingA, &h.missingB, &h.missingDiff };
    for (int m = 0; m < 3; ++m) {
        auto* data = maps[m]->data();
        data->setSize(dataCols, dataRows);
        // Cell centres, so the cell edges fall on element boundaries 0 … sourceCols.
        data->setRange(QCPRange(dataCellW / 2, h.sourceCols - dataCellW / 2),
                       QCPRange(dataCellH / 2, h.sourceRows - dataCellH / 2));
        const auto& values = *sources[m];
        for (int r = 0; r < dataRows; ++r)
            for (int c = 0; c < dataCols; ++c) {
                const double v = values[static_cast<std::size_t>(h.rows == 1 ? 0 : r) * static_cast<std::size_t>(h.cols)
                                        + static_cast<std::size_t>(h.cols == 1 ? 0 : c)];
                // An infinite |a − b| (NaN or inf opposite a number) shows as the top of the scale.
                data->setCell(c, r, m == 2 && std::isinf(v) ? diffMax * 1.0001 + 1e-300 : v);
            }
        maps[m]->setDataRange(m == 2 ? QCPRange(0, diffMax > 0 ? diffMax : 1) : QCPRange(-extent, extent));
        auto* missing = m_missingMaps[m]->data();
        const std::vector<std::uint8_t>& gap = *gaps[m];
        if (gap.empty()) {
            missing->clear();
        } else {
            missing->setSize(dataCols, dataRows);
            missing->setRange(data->keyRange(), data->valueRange());
            for (int r = 0; r < dataRows; ++r)
                for (int c = 0; c < dataCols; ++c)
                    missing->setCell(c, r,
                                     gap[static_cast<std::size_t>(h.rows == 1 ? 0 : r) * static_cast<std::size_t>(h.cols)
                                               + static_cast<std::size_t>(h.cols == 1 ? 0 : c)]
                                         ? 1.0
                                         : qQNaN());
        }
        maps[m]->keyAxis()->setRange(0, static_cast<double>(h.sourceCols));
        maps[m]->valueAxis()->setRange(0, static_cast<double>(h.sourceRows));
    }
    QVector<double> keys, values;
    for (const auto& e : detail.worst) {
        keys << static_cast<double>(e.flat % static_cast<std::uint64_t>(h.sourceCols)) + 0.5;
        values << static_cast<double>(e.flat / static_cast<std::uint64_t>(h.sourceCols)) + 0.5;
    }
    m_worstMarks->setData(keys, values);
    const auto blockRows = static_cast<long long>(std::ceil(cellH));
    const auto blockCols = static_cast<long long>(std::ceil(cellW));
    QString folded = h.sourceRows == 1 ? tr("1 row") : tr("%1 rows").arg(h.sourceRows);
    if (detail.summary.shapeA.size() > 2)
        folded = tr("%1 rows (leading dims folded)").arg(h.sourceRows);
    QString note = tr("%1 × %2 columns (last dim)").arg(folded).arg(h.sourceCols);
    if (blockRows > 1 || blockCols > 1)
        note += tr("; shown as %1 × %2 cells of up to %3 × %4 elements: A and B show block means, |A − B| block "
                   "maxima, so a single differing element stays visible")
                    .arg(h.rows)
                    .arg(h.cols)
                    .arg(blockRows)
                    .arg(blockCols);
    else
        note += tr("; every element shown");
    if (!h.missingDiff.empty())
        note += tr(". Purple cells: that side has none of their elements (a rank's file is missing or cannot be "
                   "read; the row's detail names it), so they are not compared");
    if (diffMax == 0)
        note += tr(". No element differs.");
    else if (!detail.worst.empty())
        note += tr(". Rings mark the %1 largest differences.").arg(detail.worst.size());
    m_heatmapNote->setText(note);
    m_heatmaps->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace tessera::ui
