// SPDX-License-Identifier: GPL-3.0-or-later
#include "background.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace tessera::ui {

namespace {
/// Enough for the GUI thread (weight 1024) to outweigh a busy worker (335) three to one, while the job still runs
/// ahead of other programs' background builds (nice 10).
constexpr int kBackgroundNice = 5;
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
    if (errno == 0 && current < kBackgroundNice)
        ::setpriority(PRIO_PROCESS, tid, kBackgroundNice);
#endif
}

} // namespace tessera::ui
