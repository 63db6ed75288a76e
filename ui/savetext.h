// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>

#include <string>

namespace tessera::ui {

/// Writes `bytes` to `path` whole or not at all (a QSaveFile: an existing file is replaced only once every byte
/// is written). Returns the error a user can act on, empty on success.
QString saveTextFile(const QString& path, const std::string& bytes);

} // namespace tessera::ui
