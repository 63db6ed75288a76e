// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The look the workbench's plots share: axes in the palette's colours, and colour gradients.

#include "plots/qcp.h"

#include <QColor>
#include <QFont>
#include <QPalette>

#include <initializer_list>
#include <utility>

namespace tessera::ui {

/// A gradient through `stops` (position in [0, 1], colour) that paints NaN grey.
QCPColorGradient colorGradient(std::initializer_list<std::pair<double, QColor>> stops);

/// Every axis of `rect` (lines, ticks, labels and grid) in the palette's colours and `font`.
void styleAxes(QCPAxisRect* rect, const QPalette& palette, const QFont& font);

} // namespace tessera::ui
