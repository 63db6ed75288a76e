// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

class QWidget;

namespace tessera::ui {

/// The workbench's views, in the order of their tabs and of the View menu.
enum class View { Tree, Placement, Mapping, Merge, Split, Diff, Training, Run };

/// One view of the workbench: everything the window, the View menu, the guide, `tessera gui --view` and the
/// screenshots need to know about it. The list below is the only place a view is named; a new view is a row
/// there (and its page class).
struct PageSpec {
    View view;
    const char* name;      ///< `--view NAME`, as typed on the command line
    const char* menuTitle; ///< in the View menu, with its accelerator (&)
    const char* tabTitle;
    int shortcutDigit;     ///< Ctrl+digit in the View menu
    bool scrolls;          ///< a form page: scrolls when the window is smaller than the form
    double treeShare;      ///< share of the width the shard tree gets in a screenshot of this view
    const char* guide;     ///< its line in Help → Guide (HTML)
    QWidget* (*create)(QWidget* parent); ///< makes the page shown in the view's tab
};

const std::vector<PageSpec>& workbenchPages();
const PageSpec& pageSpec(View view);
std::optional<View> viewFromName(const QString& name);
QString viewName(View view);
/// Every view's name, in order ("tree", "placement", …), for help texts and messages.
QStringList viewNames();
/// A registry string in the user's language (the strings are marked in the context "Workbench").
QString workbenchText(const char* text);

} // namespace tessera::ui
