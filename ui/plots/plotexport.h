// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>

#include <functional>

class QCustomPlot;
class QWidget;

namespace tessera::ui {

/// Writes `plot` to `path` in the format its extension names: .png (at twice the screen resolution, for slides),
/// .svg or .pdf (vector). A non-empty `caption` (what the plot shows and of which tensor) is drawn as a line above
/// the plot in the file only: a saved plot names what it is, the window already does. Returns an error message,
/// empty on success.
QString savePlot(QCustomPlot* plot, const QString& path, const QString& caption = {});

/// The file filter the save dialog offers: "PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)".
QString plotFileFilter();

/// The question "Save Plot…" asks: the path chosen for `suggestedPath` (empty when canceled) and the filter the
/// user selected.
using SavePlotDialog = std::function<QString(QWidget* parent, const QString& suggestedPath, QString* selectedFilter)>;
/// Replaces the file dialog (tests answer it without a window); an empty function restores it.
void setSavePlotDialog(SavePlotDialog dialog);

/// Adds "Save Plot…" to `plot`'s context menu; `suggestedName` (without extension) names the file it offers and
/// `caption` the line written above the plot (see savePlot()).
void addSavePlotAction(QCustomPlot* plot, const std::function<QString()>& suggestedName,
                       const std::function<QString()>& caption = {});

} // namespace tessera::ui
