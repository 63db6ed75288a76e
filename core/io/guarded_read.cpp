// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/guarded_read.h"

#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <sys/stat.h>

namespace tessera {

namespace {

/// The guarded read running on this thread, if any. Initial-exec TLS (a static library in the executable), so
/// reading it in the signal handler is safe.
thread_local sigjmp_buf* t_guard = nullptr;

struct sigaction g_previous {};

/// Hands a signal that is not a guarded read's to the handler that was installed before ours.
void chain(int signal, siginfo_t* info, void* context)
{
    if (g_previous.sa_flags & SA_SIGINFO) {
        if (g_previous.sa_sigaction)
            g_previous.sa_sigaction(signal, info, context);
        return;
    }
    if (g_previous.sa_handler == SIG_IGN && info && info->si_code <= 0)
        return; // sent by kill() and ignored before: still ignored
    if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
        // The default action, as without us: the signal is not blocked here (SA_NODEFER), so it ends the process.
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        ::sigemptyset(&dfl.sa_mask);
        ::sigaction(signal, &dfl, nullptr);
        ::raise(signal);
        return;
    }
    g_previous.sa_handler(signal);
}

void onBusError(int signal, siginfo_t* info, void* context)
{
    // si_code > 0: raised by the kernel for this thread's own access (a kill() has SI_USER or SI_QUEUE).
    if (t_guard && info && info->si_code > 0) {
        sigjmp_buf* guard = t_guard;
        t_guard = nullptr;
        ::siglongjmp(*guard, 1);
    }
    chain(signal, info, context);
}

bool installHandler()
{
    struct sigaction action {};
    action.sa_sigaction = onBusError;
    // SA_NODEFER: SIGBUS stays unblocked in the handler, so leaving it by siglongjmp needs no saved signal mask
    // (sigsetjmp without one is a few register stores, not a system call).
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    ::sigemptyset(&action.sa_mask);
    return ::sigaction(SIGBUS, &action, &g_previous) == 0;
}

} // namespace

namespace detail {

bool runGuarded(void (*fn)(void*), void* context) noexcept
{
    static const bool installed = installHandler();
    if (!installed) {
        fn(context);
        return true;
    }
    sigjmp_buf guard;
    sigjmp_buf* const outer = t_guard; // guards nest: an inner one restores the outer
    if (sigsetjmp(guard, 0) != 0) {
        t_guard = outer;
        return false;
    }
    t_guard = &guard;
    fn(context);
    t_guard = outer;
    return true;
}

} // namespace detail

Error fileChangedError(const std::string& path, std::uint64_t sizeWhenOpened)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return makeError(path + ": the file was removed or replaced while it was being read (" + std::strerror(errno)
                         + "); nothing read from it is used");
    const auto now = static_cast<std::uint64_t>(st.st_size);
    if (now < sizeWhenOpened)
        return makeError(path + ": the file changed while it was being read: it had " + std::to_string(sizeWhenOpened)
                         + " bytes and now has " + std::to_string(now)
                         + " (truncated by another process?); nothing read from it is used");
    return makeError(path + ": part of the file could not be read (a disk error, or the file changed while it was "
                            "being read); nothing read from it is used");
}

Error pastEndError(const std::string& path, const std::string& what, std::uint64_t fileSize)
{
    return makeError(path + ": " + what + " reaches past the end of the file, which has " + std::to_string(fileSize)
                     + " bytes now: it changed after it was scanned (truncated by another process?) or is damaged");
}

} // namespace tessera
