// SPDX-License-Identifier: GPL-3.0-or-later
#include "savetext.h"

#include <QCoreApplication>
#include <QDir>
#include <QSaveFile>

namespace tessera::ui {

QString saveTextFile(const QString& path, const std::string& bytes)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(bytes.data(), qint64(bytes.size())) != qint64(bytes.size())
        || !file.commit())
        return QCoreApplication::translate("Workbench", "Cannot write %1: %2")
            .arg(QDir::toNativeSeparators(path), file.errorString());
    return {};
}

} // namespace tessera::ui
