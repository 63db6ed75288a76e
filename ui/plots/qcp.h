// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The one place QCustomPlot is included. The stock header uses the `signals`/`slots` keywords and `foreach`,
// which QT_NO_KEYWORDS and QT_NO_FOREACH (needed next to libtorch headers) switch off; map them for the include
// only and undo the mapping so our own code keeps the strict spelling. QT_NO_FOREACH also removes Q_FOREACH itself,
// so `foreach` becomes a range-based for over a const view; the header's two loops only read their list.

#include <utility>

#pragma push_macro("signals")
#pragma push_macro("slots")
#pragma push_macro("emit")
#pragma push_macro("foreach")
#define signals Q_SIGNALS
#define slots Q_SLOTS
#define emit Q_EMIT
#define foreach(variable, container) for (variable : std::as_const(container))
#include <qcustomplot.h>
#pragma pop_macro("foreach")
#pragma pop_macro("emit")
#pragma pop_macro("slots")
#pragma pop_macro("signals")
