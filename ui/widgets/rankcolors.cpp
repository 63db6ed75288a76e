// SPDX-License-Identifier: GPL-3.0-or-later
#include "rankcolors.h"

#include <cmath>

namespace tessera::ui {

bool isDarkPalette(const QPalette& palette) { return palette.color(QPalette::Window).lightnessF() < 0.5; }

QColor rankColor(int rank, const QPalette& palette)
{
    const bool dark = isDarkPalette(palette);
    if (rank < 0)
        return dark ? QColor(0x60, 0x60, 0x60) : QColor(0xb0, 0xb0, 0xb0);
    const double hue = std::fmod(0.58 + rank * 0.381966, 1.0);
    return QColor::fromHslF(static_cast<float>(hue), dark ? 0.45f : 0.55f, dark ? 0.42f : 0.70f);
}

QColor textColorOn(const QColor& background)
{
    // Relative luminance (sRGB weights); 0.55 keeps white on mid-dark tones.
    const double l = 0.2126 * background.redF() + 0.7152 * background.greenF() + 0.0722 * background.blueF();
    return l > 0.55 ? QColor(0x10, 0x10, 0x10) : QColor(0xf5, 0xf5, 0xf5);
}

QColor problemColor(const QPalette& palette)
{
    return isDarkPalette(palette) ? QColor(0xff, 0x6b, 0x6b) : QColor(0xc6, 0x28, 0x28);
}

} // namespace tessera::ui
