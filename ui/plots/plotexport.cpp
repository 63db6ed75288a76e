// SPDX-License-Identifier: GPL-3.0-or-later
#include "plotexport.h"

#include "qcp.h"

#include <QAction>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QSvgGenerator>

namespace tessera::ui {

namespace {

SavePlotDialog& dialogOverride()
{
    static SavePlotDialog dialog;
    return dialog;
}

QString askForPath(QWidget* parent, const QString& suggestedPath, QString* selectedFilter)
{
    if (const SavePlotDialog& dialog = dialogOverride())
        return dialog(parent, suggestedPath, selectedFilter);
    return QFileDialog::getSaveFileName(parent, QObject::tr("Save Plot"), suggestedPath, plotFileFilter(),
                                        selectedFilter);
}

/// The caption as the first row of the plot's layout for as long as it lives: every export draws the layout
/// (QCustomPlot lays it out again for each), so PNG, SVG and PDF all carry it and the window never shows it.
class TemporaryCaption {
public:
    TemporaryCaption(QCustomPlot* plot, const QString& caption) : m_plot(plot)
    {
        if (caption.isEmpty())
            return;
        QFont font = plot->font();
        font.setBold(true);
        m_element = new QCPTextElement(plot, caption, font);
        plot->plotLayout()->insertRow(0);
        plot->plotLayout()->addElement(0, 0, m_element);
        plot->plotLayout()->setRowStretchFactor(0, 0.001);
    }
    ~TemporaryCaption()
    {
        if (!m_element)
            return;
        m_plot->plotLayout()->remove(m_element); // deletes it
        m_plot->plotLayout()->simplify();
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }
    TemporaryCaption(const TemporaryCaption&) = delete;
    TemporaryCaption& operator=(const TemporaryCaption&) = delete;

private:
    QCustomPlot* m_plot;
    QCPTextElement* m_element = nullptr;
};

bool saveSvg(QCustomPlot* plot, const QString& path, const QString& title)
{
    // QCustomPlot draws into any QPaintDevice; an SVG generator keeps every line and label as a vector.
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(plot->size());
    svg.setViewBox(QRect(QPoint(0, 0), plot->size()));
    svg.setTitle(title);
    QCPPainter painter;
    if (!painter.begin(&svg))
        return false;
    plot->toPainter(&painter, plot->width(), plot->height());
    return painter.end();
}

} // namespace

QString plotFileFilter()
{
    return QObject::tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)");
}

void setSavePlotDialog(SavePlotDialog dialog) { dialogOverride() = std::move(dialog); }

QString savePlot(QCustomPlot* plot, const QString& path, const QString& caption)
{
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix != QLatin1String("png") && suffix != QLatin1String("pdf") && suffix != QLatin1String("svg"))
        return QObject::tr("%1: choose a .png, .svg or .pdf file name").arg(path);
    const TemporaryCaption shown(plot, caption);
    bool ok = false;
    if (suffix == QLatin1String("png"))
        ok = plot->savePng(path, 0, 0, 2.0);
    else if (suffix == QLatin1String("pdf"))
        ok = plot->savePdf(path, 0, 0, QCP::epAllowCosmetic, QStringLiteral("Tessera"), caption);
    else
        ok = saveSvg(plot, path, caption);
    return ok && QFileInfo(path).size() > 0 ? QString() : QObject::tr("%1 could not be written").arg(path);
}

void addSavePlotAction(QCustomPlot* plot, const std::function<QString()>& suggestedName,
                       const std::function<QString()>& caption)
{
    plot->setContextMenuPolicy(Qt::ActionsContextMenu);
    auto* save = new QAction(QObject::tr("Save Plot…"), plot);
    save->setToolTip(QObject::tr("Save this plot as PNG, SVG or PDF"));
    QObject::connect(save, &QAction::triggered, plot, [plot, suggestedName, caption] {
        QString selected;
        const QString path = askForPath(plot, suggestedName() + QStringLiteral(".png"), &selected);
        if (path.isEmpty())
            return;
        // The dialog may return a name without the extension of the chosen filter.
        QString target = path;
        if (QFileInfo(target).suffix().isEmpty())
            target += selected.contains(QLatin1String("svg"))   ? QStringLiteral(".svg")
                : selected.contains(QLatin1String("pdf")) ? QStringLiteral(".pdf")
                                                         : QStringLiteral(".png");
        if (const QString error = savePlot(plot, target, caption ? caption() : QString()); !error.isEmpty())
            QMessageBox::warning(plot, QObject::tr("Save Plot"), error);
    });
    plot->addAction(save);
}

} // namespace tessera::ui
