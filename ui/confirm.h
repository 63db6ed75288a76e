// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Questions the workbench asks before it destroys something (replacing a model, closing during a merge). One
// hook for all of them, so tests can answer without a modal dialog.

#include <QString>

#include <functional>

class QWidget;

namespace tessera::ui {

/// Asks `question` (Yes/No, No the default); true for Yes.
using ConfirmFn = std::function<bool(QWidget* parent, const QString& title, const QString& question)>;

/// The hook every confirmation goes through; a QMessageBox unless a test replaced it.
ConfirmFn& confirmHook();

/// confirmHook()(parent, title, question).
bool confirm(QWidget* parent, const QString& title, const QString& question);

} // namespace tessera::ui
