// SPDX-License-Identifier: GPL-3.0-or-later
// Runs the tessera executable with a wall-clock limit and an address-space limit, so that a hostile input that
// makes it hang or allocate without bound fails the test instead of stalling the suite or eating the machine.
#pragma once

#include "testutil.h"

#include <QElapsedTimer>
#include <QProcess>
#include <QProcessEnvironment>
#include <QStringList>

#include <sys/resource.h>

#include <algorithm>

#include <string>
#include <vector>

namespace tessera::test {

struct BoundedRun {
    int exitCode = -1;
    bool crashed = false;   ///< killed by a signal (abort, segfault, the memory limit's bad_alloc → abort)
    bool timedOut = false;  ///< still running at the deadline, then killed
    double seconds = 0;
    QString out;
    QString err;

    /// One line saying how the run ended, for failure messages.
    QString outcome() const
    {
        if (timedOut)
            return QStringLiteral("did not finish within the time limit (killed)");
        if (crashed)
            return QStringLiteral("crashed (killed by a signal)");
        return QStringLiteral("exited with %1").arg(exitCode);
    }
};

// AddressSanitizer reserves terabytes of shadow address space, so an RLIMIT_AS would stop the sanitized
// executable from starting; there the sanitizer's own RSS limit bounds memory instead.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

/// Address space the child may map. The fixtures are a few hundred kilobytes; the tessera executable with Qt
/// maps well under a gigabyte, so 4 GB is far above a correct run and far below what would hurt the machine.
inline constexpr rlim_t kChildAddressSpace = 4'000'000'000ULL;

/// A tessera child process under the limits: start it, do other work (another run), then finish it.
class BoundedProcess {
public:
    /// `addressSpace`: what the child may map (a test of a bound tighter than kChildAddressSpace passes less).
    void start(const std::vector<std::string>& args, rlim_t addressSpace = kChildAddressSpace)
    {
        QStringList arguments;
        for (const auto& a : args)
            arguments << QString::fromStdString(a);
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        if (kSanitizedBuild) {
            const QString asan = env.value(QStringLiteral("ASAN_OPTIONS"));
            env.insert(QStringLiteral("ASAN_OPTIONS"), (asan.isEmpty() ? QString() : asan + QLatin1Char(':'))
                                                           + QStringLiteral("hard_rss_limit_mb=%1").arg(addressSpace / 1000000));
        }
        m_process.setProcessEnvironment(env);
        if (!kSanitizedBuild) {
            m_process.setChildProcessModifier([addressSpace] {
                const rlimit limit { addressSpace, addressSpace };
                ::setrlimit(RLIMIT_AS, &limit);
            });
        }
        m_timer.start();
        m_process.start(QString::fromStdString(tesseraBinary()), arguments);
    }

    /// Waits until `timeoutMs` after the start, then kills the child if it is still running.
    BoundedRun finish(int timeoutMs)
    {
        BoundedRun run;
        if (!m_process.waitForStarted(timeoutMs)) {
            run.err = QStringLiteral("could not start ") + QString::fromStdString(tesseraBinary());
            run.crashed = true;
            return run;
        }
        const qint64 left = std::max<qint64>(1, timeoutMs - m_timer.elapsed());
        if (!m_process.waitForFinished(static_cast<int>(left))) {
            run.timedOut = true;
            m_process.kill();
            m_process.waitForFinished(5000);
        }
        run.seconds = static_cast<double>(m_timer.elapsed()) / 1000.0;
        run.out = QString::fromUtf8(m_process.readAllStandardOutput());
        run.err = QString::fromUtf8(m_process.readAllStandardError());
        if (!run.timedOut) {
            run.crashed = m_process.exitStatus() != QProcess::NormalExit;
            run.exitCode = run.crashed ? -1 : m_process.exitCode();
        }
        return run;
    }

private:
    QProcess m_process;
    QElapsedTimer m_timer;
};

/// Runs `tessera args…` and kills it after `timeoutMs`.
inline BoundedRun runTesseraBounded(const std::vector<std::string>& args, int timeoutMs,
                                    rlim_t addressSpace = kChildAddressSpace)
{
    BoundedProcess process;
    process.start(args, addressSpace);
    return process.finish(timeoutMs);
}

} // namespace tessera::test
