// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QPalette>
#include <QString>

namespace tessera::ui {

/// Light and dark palettes. "System" keeps the palette the platform gave the application at start-up (Qt 6.4 has
/// no colour-scheme API; the platform theme's palette already follows the desktop's light/dark setting), so the
/// workbench follows the system unless the user picks one explicitly.
class Theme {
public:
    enum class Mode { System, Light, Dark };

    /// Records the platform palette; call once after QApplication is constructed.
    static void captureSystemPalette();
    static void apply(Mode mode);
    static Mode current();
    static QPalette lightPalette();
    static QPalette darkPalette();
    static QString modeName(Mode mode);
    static Mode modeFromName(const QString& name);
};

} // namespace tessera::ui
