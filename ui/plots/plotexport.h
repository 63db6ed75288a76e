// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>

#include <functional>

class QCustomPlot;
class QWidget;

namespace tessera::ui {

/// Writes `plot` to `path` in the format its extension names: .png (at twice the screen resolution, for slides),
/// .svg or .pdf (vector). Returns an error message, empty on success.
QString savePlot(QCustomPlot* plot, const QString& path);

/// The file filter the save dialog offers: "PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)".
QString plotFileFilter();

/// Adds "Save Plot…" to `plot`'s context menu; `suggestedName` (without extension) names the file it offers.
void addSavePlotAction(QCustomPlot* plot, const std::function<QString()>& suggestedName);

} // namespace tessera::ui
