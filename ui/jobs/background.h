// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QThreadPool>
#include <QtConcurrent>

#include <utility>

namespace tessera::ui {

/// Makes the calling worker thread give way to the GUI thread: on Linux it raises the thread's nice value by 5
/// (once per thread, at most to 19; threads it starts inherit it). A merge, split or diff keeps every core busy; at the
/// same priority the GUI thread, the X server and Qt's paint helpers wait behind it for a core, and the window
/// stalls for up to a tenth of a second at a time on a loaded 2-core machine (bench_gui_stalls). A lower
/// priority costs the job nothing when the machine has cores to spare.
void yieldToInterface();

/// QtConcurrent::run of `function` on `pool`, in a thread that yields to the interface: how every job of the
/// workbench starts its work.
template <typename Function>
auto runInBackground(QThreadPool* pool, Function&& function)
{
    return QtConcurrent::run(pool, [function = std::forward<Function>(function)]() mutable {
        yieldToInterface();
        return function();
    });
}

} // namespace tessera::ui
