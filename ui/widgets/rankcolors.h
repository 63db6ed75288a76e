// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QColor>
#include <QPalette>

namespace tessera::ui {

/// The colour of a rank, the same in the placement drawing, the mesh grid and the legend. Hues step by the
/// golden angle so neighbouring ranks differ clearly; lightness follows the palette so labels stay readable.
QColor rankColor(int rank, const QPalette& palette);
/// Black or white, whichever reads better on `background`.
QColor textColorOn(const QColor& background);
/// The red of gaps, overlaps and problems for this palette.
QColor problemColor(const QPalette& palette);
bool isDarkPalette(const QPalette& palette);

} // namespace tessera::ui
