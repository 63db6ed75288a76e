// SPDX-License-Identifier: GPL-3.0-or-later
#include "gui_main.h"

#include "mainwindow.h"

#include <QApplication>

namespace tessera::app {

int runGui(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("Tessera"));
    QApplication::setOrganizationName(QStringLiteral("Tessera"));
    QApplication::setApplicationVersion(QStringLiteral(TESSERA_VERSION));
    tessera::ui::MainWindow window;
    window.show();
    return app.exec();
}

} // namespace tessera::app
