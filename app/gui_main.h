// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>
#include <QStringList>

namespace tessera::app {

/// `tessera gui [PATH] [--screenshot FILE.png] [--view VIEW] [--reference DIR]`.
struct GuiOptions {
    QString path;
    QString screenshot;
    QString view;
    QString reference;
    QString size;       ///< --size as given
    int width = 1440;   ///< the screenshot's window size
    int height = 880;
    bool help = false;
    QString error; ///< non-empty when the arguments are wrong
};

/// Parses the arguments after `gui` (or all arguments when the program started without a command).
GuiOptions parseGuiArgs(const QStringList& args);

/// Starts the workbench (QApplication + main window); `tessera gui [PATH]`. With --screenshot it renders the
/// window with PATH loaded and the view shown, writes the PNG and exits (works with QT_QPA_PLATFORM=offscreen).
int runGui(int argc, char** argv);

} // namespace tessera::app
