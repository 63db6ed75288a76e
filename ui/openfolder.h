// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// "Open output" after a merge or split: the written folder in the desktop's file manager. One hook, so tests can
// see which folder would open without starting a file manager.

#include <QString>

#include <functional>

namespace tessera::ui {

/// Opens `folder`; false when the desktop could not.
using OpenFolderFn = std::function<bool(const QString& folder)>;

/// The hook every "Open output" goes through; QDesktopServices unless a test replaced it.
OpenFolderFn& openFolderHook();

/// openFolderHook()(folder).
bool openFolder(const QString& folder);

} // namespace tessera::ui
