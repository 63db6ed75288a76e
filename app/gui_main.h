// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

namespace tessera::app {

/// Starts the workbench (QApplication + main window); `tessera gui [PATH]`.
int runGui(int argc, char** argv);

} // namespace tessera::app
