// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

class QAbstractItemView;
class QString;

namespace tessera::ui {

/// Gives `view` a "Copy Name" action (context menu and Ctrl+C while it has focus) that puts the full text of
/// `nameColumn` of every selected row on the clipboard, one per line: the names as they are, never shortened.
void addCopyNamesAction(QAbstractItemView* view, int nameColumn);

/// The names addCopyNamesAction() copies, in view order.
QString selectedNames(const QAbstractItemView* view, int nameColumn);

} // namespace tessera::ui
