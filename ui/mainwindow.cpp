// SPDX-License-Identifier: GPL-3.0-or-later
#include "mainwindow.h"

namespace tessera::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) { setWindowTitle(QStringLiteral("Tessera")); }

MainWindow::~MainWindow() = default;

} // namespace tessera::ui
