// SPDX-License-Identifier: GPL-3.0-or-later
#include "statisticswindow.h"

#include "coreconvert.h"
#include "models/difftablemodel.h"
#include "plots/plotexport.h"
#include "plots/qcp.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

namespace tessera::ui {

StatisticsWindow::StatisticsWindow(QWidget* parent)
    : QDialog(parent)
    , m_job(new StatisticsJob(this))
    , m_title(new QLabel(this))
    , m_stats(new QLabel(this))
    , m_histogram(new QCustomPlot(this))
{
    setWindowTitle(tr("Tensor Statistics"));
    setModal(false);
    resize(760, 420);
    m_title->setTextFormat(Qt::RichText);
    m_title->setWordWrap(true);
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_stats->setTextFormat(Qt::RichText);
    m_stats->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_stats->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_stats->setMinimumWidth(m_stats->fontMetrics().horizontalAdvance(QStringLiteral("elements  888,888,888,888")) + 20);
    m_histogram->setMinimumSize(320, 220);
    m_histogram->xAxis->setLabel(tr("value"));
    m_histogram->yAxis->setLabel(tr("elements"));
    auto* bars = new QCPBars(m_histogram->xAxis, m_histogram->yAxis);
    bars->setPen(QPen(QColor(0x1f, 0x77, 0xb4)));
    bars->setBrush(QColor(0x1f, 0x77, 0xb4, 120));
    bars->setWidthType(QCPBars::wtPlotCoords);
    addSavePlotAction(m_histogram, [this]() -> QString {
        return (m_name.isEmpty() ? QStringLiteral("tensor") : m_name) + QStringLiteral("-values");
    });

    auto* body = new QHBoxLayout;
    body->addWidget(m_stats);
    body->addWidget(m_histogram, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_title);
    layout->addLayout(body, 1);

    connect(m_job, &StatisticsJob::finished, this, &StatisticsWindow::onFinished);
    connect(m_job, &StatisticsJob::failed, this, [this](const QString& tensor, const QString& message) {
        m_title->setText(QStringLiteral("<b>%1</b><br><span style='color:#d03030'>%2</span>")
                             .arg(tensor.toHtmlEscaped(), message.toHtmlEscaped()));
        m_stats->clear();
        Q_EMIT shown(tensor);
    });
}

StatisticsWindow::~StatisticsWindow() = default;

QString StatisticsWindow::statsText() const { return m_stats->text(); }

QString StatisticsWindow::titleText() const { return m_title->text(); }

void StatisticsWindow::showTensor(CheckpointPtr checkpoint, int tensorIndex)
{
    if (!checkpoint || tensorIndex < 0 || tensorIndex >= static_cast<int>(checkpoint->tensors.size()))
        return;
    const auto& tensor = checkpoint->tensors[static_cast<std::size_t>(tensorIndex)];
    m_name = qs(tensor.name);
    m_title->setText(tr("<b>%1</b> &nbsp; %2 · %3<br>Reading %4…")
                         .arg(m_name.toHtmlEscaped(), shapeText(tensor.shape), dtypeText(tensor.dtype),
                              bytesText(tensor.nbytes())));
    m_stats->clear();
    if (auto* bars = qobject_cast<QCPBars*>(m_histogram->plottable(0)))
        bars->data()->clear();
    m_histogram->replot(QCustomPlot::rpQueuedReplot);
    m_job->start(std::move(checkpoint), m_name);
}

void StatisticsWindow::onFinished(const TensorStatisticsPtr& statistics)
{
    const tessera::TensorStatistics& t = *statistics;
    const QString muted = palette().color(QPalette::PlaceholderText).name();
    QString title = QStringLiteral("<b>%1</b> &nbsp; %2 · %3").arg(qs(t.name).toHtmlEscaped(), shapeText(t.shape), dtypeText(t.dtype));
    if (t.missing)
        title += QStringLiteral("<br><span style='color:#8e24aa'>%1</span>")
                     .arg(tr("%1 of %2 elements are missing (no rank's file holds them): they are in no statistic")
                              .arg(t.missing)
                              .arg(t.elements));
    m_title->setText(title);
    QString html = QStringLiteral("<table cellspacing='0' cellpadding='2'>");
    auto row = [&](const QString& label, const QString& value) {
        html += QStringLiteral("<tr><td style='color:%1'>%2&nbsp;&nbsp;</td><td align='right'>%3</td></tr>").arg(muted, label, value);
    };
    row(tr("elements"), QLocale().toString(static_cast<qulonglong>(t.elements)));
    if (t.numeric) {
        row(tr("min"), DiffTableModel::exactText(t.stats.min));
        row(tr("max"), DiffTableModel::exactText(t.stats.max));
        row(tr("mean"), DiffTableModel::exactText(t.stats.mean));
        row(tr("std"), DiffTableModel::exactText(t.stats.std));
        row(tr("zeros"), QLocale().toString(static_cast<qulonglong>(t.stats.zeros)));
        row(tr("NaN"), QLocale().toString(static_cast<qulonglong>(t.stats.nan)));
        row(tr("±Inf"), QLocale().toString(static_cast<qulonglong>(t.stats.inf)));
    }
    if (t.missing)
        row(tr("missing"), QLocale().toString(static_cast<qulonglong>(t.missing)));
    html += QStringLiteral("</table>");
    if (!t.numeric)
        html += tr("<p>%1 values are not read as numbers.</p>").arg(dtypeText(t.dtype));
    m_stats->setText(html);

    if (auto* bars = qobject_cast<QCPBars*>(m_histogram->plottable(0))) {
        QVector<double> keys, values;
        double peak = 1;
        for (std::size_t i = 0; i < t.values.counts.size(); ++i) {
            keys << t.values.binCenter(i);
            values << t.values.counts[i];
            peak = std::max(peak, t.values.counts[i]);
        }
        bars->setWidth(t.values.binWidth());
        bars->setData(keys, values, true);
        m_histogram->xAxis->setRange(t.values.lo, t.values.hi);
        m_histogram->yAxis->setRange(0, peak * 1.1);
    }
    m_histogram->replot(QCustomPlot::rpQueuedReplot);
    Q_EMIT shown(qs(t.name));
}

} // namespace tessera::ui
