// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QList>

class QAbstractItemView;
class QString;

namespace tessera::ui {

/// Gives `view` a "Copy Name" action (context menu and Ctrl+C while it has focus) that puts the full text of
/// `nameColumn` of every selected row on the clipboard, one per line: the names as they are, never shortened.
void addCopyNamesAction(QAbstractItemView* view, int nameColumn);

/// The same for a view with several name columns (the Mapping table's source and Hugging Face names): the column
/// of the current cell is copied when it is one of `nameColumns`, else the first of them.
void addCopyNamesAction(QAbstractItemView* view, const QList<int>& nameColumns);

/// The names addCopyNamesAction() copies, in view order.
QString selectedNames(const QAbstractItemView* view, int nameColumn);

/// The column of `nameColumns` that Copy Name takes in `view` now: the current cell's, or the first.
int copiedNameColumn(const QAbstractItemView* view, const QList<int>& nameColumns);

} // namespace tessera::ui
