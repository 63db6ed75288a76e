// SPDX-License-Identifier: GPL-3.0-or-later
// The workbench's jobs run below the GUI thread's priority, so a merge, split or diff that keeps every core busy
// does not leave the window waiting for one (bench_gui_stalls measures the stalls): runInBackground and the
// latest-only runner lower their worker's priority, the threads a worker starts inherit it, and every job of
// ui/jobs starts its work through them.
#include "jobs/background.h"
#include "jobs/latestonlyrunner.h"

#include <QDirIterator>
#include <QFile>
#include <QTest>
#include <QThread>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

using namespace tessera::ui;

namespace {
/// The calling thread's nice value.
int threadNice()
{
    return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
}
} // namespace

class TestBackground : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void workerRunsBelowTheInterface()
    {
        const int gui = threadNice();
        QThreadPool pool;
        const auto niceness = runInBackground(&pool, [] {
            int inherited = 0;
            std::thread child([&] { inherited = threadNice(); }); // what core's parallelFor starts
            child.join();
            return std::make_pair(threadNice(), inherited);
        }).result();
        // Below the GUI thread however the workbench was started (`nice tessera gui` too), unless nothing is lower.
        QVERIFY2(niceness.first > gui || gui == 19,
                 qPrintable(QStringLiteral("worker %1, GUI thread %2").arg(niceness.first).arg(gui)));
        QCOMPARE(niceness.second, niceness.first);
        QCOMPARE(threadNice(), gui); // the GUI thread keeps its own
    }

    void latestOnlyRunnerRunsBelowTheInterface()
    {
        const int gui = threadNice();
        LatestOnlyRunner runner;
        int worker = gui;
        bool delivered = false;
        runner.start([&](tessera::Progress&) -> std::function<void()> {
            const int seen = threadNice();
            return [&, seen] {
                worker = seen;
                delivered = true;
            };
        });
        QTRY_VERIFY_WITH_TIMEOUT(delivered, 10000);
        QVERIFY(worker > gui || gui == 19);
    }

    /// A run whose worker has returned is running until its result is handled on the GUI thread (Qt 6's
    /// QFutureWatcher::isFinished() is already true then); a cancel meanwhile drops the result.
    void aRunEndsWhenItsResultIsHandled()
    {
        LatestOnlyRunner runner;
        int delivered = 0;
        bool runningWhileDelivered = true;
        const auto work = [&](tessera::Progress&) -> std::function<void()> {
            return [&] {
                runningWhileDelivered = runner.isRunning();
                ++delivered;
            };
        };
        runner.start(work);
        QThread::msleep(300); // the worker returns; its result waits in the event queue
        QVERIFY(runner.isRunning());
        QTRY_COMPARE_WITH_TIMEOUT(delivered, 1, 10000);
        QVERIFY(!runningWhileDelivered);
        QVERIFY(!runner.isRunning());
        runner.start(work);
        QThread::msleep(300);
        runner.cancel();
        QVERIFY(!runner.isRunning());
        QTest::qWait(200);
        QCOMPARE(delivered, 1);
    }

    /// Every job starts its work through runInBackground (or, for a QPromise worker, calls yieldToInterface).
    void everyJobStartsInTheBackground()
    {
        const QString jobs = QStringLiteral(TESSERA_TEST_DATA_DIR "/../../ui/jobs");
        QDirIterator it(jobs, { QStringLiteral("*.cpp") });
        int files = 0;
        while (it.hasNext()) {
            QFile file(it.next());
            QVERIFY(file.open(QIODevice::ReadOnly));
            const QString text = QString::fromUtf8(file.readAll());
            ++files;
            if (text.contains(QLatin1String("QtConcurrent::run(")))
                QVERIFY2(text.contains(QLatin1String("yieldToInterface();")),
                         qPrintable(it.fileName() + QStringLiteral(": QtConcurrent::run without runInBackground")));
        }
        QVERIFY(files > 5);
    }
};

QTEST_GUILESS_MAIN(TestBackground)
#include "tst_background.moc"
