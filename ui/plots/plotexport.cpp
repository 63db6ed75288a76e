// SPDX-License-Identifier: GPL-3.0-or-later
#include "plotexport.h"

#include "qcp.h"

#include <QAction>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QSvgGenerator>

namespace tessera::ui {

QString plotFileFilter()
{
    return QObject::tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)");
}

QString savePlot(QCustomPlot* plot, const QString& path)
{
    const QString suffix = QFileInfo(path).suffix().toLower();
    bool ok = false;
    if (suffix == QLatin1String("png")) {
        ok = plot->savePng(path, 0, 0, 2.0);
    } else if (suffix == QLatin1String("pdf")) {
        ok = plot->savePdf(path);
    } else if (suffix == QLatin1String("svg")) {
        // QCustomPlot draws into any QPaintDevice; an SVG generator keeps every line and label as a vector.
        QSvgGenerator svg;
        svg.setFileName(path);
        svg.setSize(plot->size());
        svg.setViewBox(QRect(QPoint(0, 0), plot->size()));
        svg.setTitle(plot->objectName());
        QCPPainter painter;
        ok = painter.begin(&svg);
        if (ok) {
            plot->toPainter(&painter, plot->width(), plot->height());
            ok = painter.end();
        }
    } else {
        return QObject::tr("%1: choose a .png, .svg or .pdf file name").arg(path);
    }
    return ok && QFileInfo(path).size() > 0 ? QString() : QObject::tr("%1 could not be written").arg(path);
}

void addSavePlotAction(QCustomPlot* plot, const std::function<QString()>& suggestedName)
{
    plot->setContextMenuPolicy(Qt::ActionsContextMenu);
    auto* save = new QAction(QObject::tr("Save Plot…"), plot);
    save->setToolTip(QObject::tr("Save this plot as PNG, SVG or PDF"));
    QObject::connect(save, &QAction::triggered, plot, [plot, suggestedName] {
        QString selected;
        const QString path = QFileDialog::getSaveFileName(plot, QObject::tr("Save Plot"), suggestedName() + QStringLiteral(".png"),
                                                          plotFileFilter(), &selected);
        if (path.isEmpty())
            return;
        // The dialog may return a name without the extension of the chosen filter.
        QString target = path;
        if (QFileInfo(target).suffix().isEmpty())
            target += selected.contains(QLatin1String("svg"))   ? QStringLiteral(".svg")
                : selected.contains(QLatin1String("pdf")) ? QStringLiteral(".pdf")
                                                         : QStringLiteral(".png");
        if (const QString error = savePlot(plot, target); !error.isEmpty())
            QMessageBox::warning(plot, QObject::tr("Save Plot"), error);
    });
    plot->addAction(save);
}

} // namespace tessera::ui
