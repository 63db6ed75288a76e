// SPDX-License-Identifier: GPL-3.0-or-later
#include "background.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace tessera::ui {

namespace {
/// Five steps below the thread that started the worker (the GUI thread's weight outweighs it three to one), so that
/// a workbench started with `nice` keeps its GUI thread above its workers too.
constexpr int kBackgroundNice = 5;
constexpr int kLowestNice = 19;
} // namespace

void yieldToInterface()
{
    thread_local bool lowered = false;
    if (lowered)
        return;
    lowered = true;
#ifdef __linux__
    // On Linux the nice value is a thread's own (PRIO_PROCESS with a thread id); POSIX would apply it to the
    // whole process, the GUI thread included, so other systems keep the default.
    const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
    errno = 0;
    const int current = ::getpriority(PRIO_PROCESS, tid);
    if (errno == 0 && current < kLowestNice)
        ::setpriority(PRIO_PROCESS, tid, std::min(current + kBackgroundNice, kLowestNice));
#endif
}

} // namespace tessera::ui
