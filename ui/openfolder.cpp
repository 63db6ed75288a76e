// SPDX-License-Identifier: GPL-3.0-or-later
#include "openfolder.h"

#include <QDesktopServices>
#include <QUrl>

namespace tessera::ui {

OpenFolderFn& openFolderHook()
{
    static OpenFolderFn hook = [](const QString& folder) { return QDesktopServices::openUrl(QUrl::fromLocalFile(folder)); };
    return hook;
}

bool openFolder(const QString& folder) { return openFolderHook()(folder); }

} // namespace tessera::ui
