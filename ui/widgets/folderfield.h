// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>

#include <functional>

class QLineEdit;
class QPushButton;
class QWidget;

namespace tessera::ui {

/// `field` with `button` to its right, in one row.
QWidget* withButton(QWidget* field, QPushButton* button, QWidget* parent);

/// A folder field with a Browse… button. The dialog opens at the field's folder, or (empty) where `fallback`
/// says, e.g. beside the checkpoint; Qt's folder dialog can create the folder too.
QWidget* withBrowse(QLineEdit* edit, QWidget* parent, const std::function<QString()>& fallback = {});

} // namespace tessera::ui
