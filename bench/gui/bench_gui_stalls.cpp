// SPDX-License-Identifier: GPL-3.0-or-later
// Responsiveness benchmark (not a test): opens bench's synthetic FSDP2 checkpoint (about 1.33 GB, written once by
// synthetic_checkpoint.h) in the workbench at 1280×720, then scans it, merges it, splits it and compares it with
// its merge, each through its page as a user would, and records the longest gap between two turns of the GUI
// thread's event loop during each phase. A 1 ms precise timer measures the gaps; every event the application
// delivers is timed too, so a stall is named by the object and event that took the time. The machine's load
// (1-minute load average and cores) is printed beside the numbers: a gap on a machine busy with other builds is
// the scheduler's as much as the program's.
//
//   bench_gui_stalls [--work DIR] [--gb 1.2] [--ranks 4] [--limit_ms 50] [--keep]
//
// Run it in a real X session (xvfb-run -a bench_gui_stalls) or with QT_QPA_PLATFORM=offscreen. Exit code 0 when
// no phase's longest gap exceeds --limit_ms, 1 when one does, 2 on a usage error, 3 when a phase fails.

#include "../bench_args.h"
#include "../bench_timing.h"
#include "../synthetic_checkpoint.h"
#include "gui_stall_monitor.h"
#include "jobs/mergejob.h"
#include "jobs/splitjob.h"
#include "mainwindow.h"
#include "pages/diffpage.h"
#include "pages/mergepage.h"
#include "pages/splitpage.h"

#include <QApplication>
#include <QEventLoop>
#include <QStandardPaths>
#include <QThread>
#include <QTimer>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

using namespace tessera;
using namespace tessera::bench;
using namespace tessera::ui;
namespace fs = std::filesystem;

namespace {

constexpr int kPhaseTimeoutMs = 30 * 60 * 1000;

/// Runs the event loop until `done()` holds (checked after every event batch and every 10 ms) or the timeout.
bool waitFor(const std::function<bool()>& done, int timeoutMs = kPhaseTimeoutMs)
{
    QElapsedTimer clock;
    clock.start();
    while (!done()) {
        if (clock.elapsed() > timeoutMs)
            return false;
        QEventLoop loop;
        QTimer::singleShot(10, &loop, &QEventLoop::quit);
        loop.exec();
    }
    return true;
}

/// Lets the event loop run for `ms`, so the work a phase starts after its signal (plans, mappings) is measured.
void settle(int ms)
{
    QEventLoop loop;
    QTimer::singleShot(ms, &loop, &QEventLoop::quit);
    loop.exec();
}

std::string loadAverage()
{
    std::ifstream in("/proc/loadavg");
    std::string oneMinute;
    in >> oneMinute;
    return oneMinute.empty() ? std::string("?") : oneMinute;
}

/// The synthetic checkpoint's actor folder under `work`, written when it is not there yet.
std::string syntheticCheckpoint(const std::string& work, double gb, int ranks)
{
    const std::string dir = work + "/actor";
    if (fs::exists(dir + "/model_world_size_" + std::to_string(ranks) + "_rank_0.pt"))
        return dir;
    std::cout << "writing a " << gb << " GB synthetic FSDP2 checkpoint (" << ranks << " ranks) to " << dir << "\n";
    if (auto status = writeCheckpoint(dir, gb, ranks); !status) {
        std::cerr << status.error().message << "\n";
        return {};
    }
    return dir;
}

/// Connections to locals of one phase, cut when the phase returns.
struct PhaseConnections {
    std::vector<QMetaObject::Connection> list;
    ~PhaseConnections()
    {
        for (const auto& c : list)
            QObject::disconnect(c);
    }
};

struct Phases {
    MainWindow& window;
    StallMonitor& monitor;
    std::string work;

    bool scan(const std::string& checkpoint)
    {
        monitor.begin("scan");
        bool loaded = false;
        PhaseConnections connections;
        connections.list.push_back(
            QObject::connect(&window, &MainWindow::checkpointLoaded, &window, [&] { loaded = true; }));
        connections.list.push_back(QObject::connect(&window, &MainWindow::scanFailed, &window,
                                                    [](const QString& m) { std::cerr << m.toStdString() << "\n"; }));
        window.openPath(QString::fromStdString(checkpoint));
        const bool ok = waitFor([&] { return loaded; });
        settle(3000); // the Mapping, Summary and Merge plan that follow a scan
        monitor.end();
        return ok;
    }

    bool merge()
    {
        auto* page = window.findChild<MergePage*>();
        window.showView(View::Merge);
        fs::remove_all(work + "/merged");
        page->setTargetDir(QString::fromStdString(work + "/merged"));
        if (!waitFor([&] { return page->canRun(); }, 60000))
            return false;
        monitor.begin("merge");
        bool finished = false, ok = false;
        PhaseConnections connections;
        connections.list.push_back(QObject::connect(page->job(), &MergeJob::finished, page, [&](const MergeResult& r) {
            finished = true;
            ok = r.ok;
            std::cout << "  " << r.message.toStdString() << "\n";
        }));
        page->run();
        waitFor([&] { return finished; });
        settle(1000);
        monitor.end();
        return ok;
    }

    bool split()
    {
        auto* page = window.splitPage();
        window.showView(View::Split);
        fs::remove_all(work + "/split");
        page->setFormat(QStringLiteral("dcp"));
        page->setWorldSize(2);
        page->setTargetDir(QString::fromStdString(work + "/split"));
        if (!waitFor([&] { return page->canRun(); }, 60000))
            return false;
        monitor.begin("split");
        bool finished = false, ok = false;
        PhaseConnections connections;
        connections.list.push_back(QObject::connect(page->job(), &SplitJob::finished, page, [&](const SplitResult& r) {
            finished = true;
            ok = r.ok;
            std::cout << "  " << r.message.toStdString() << "\n";
        }));
        page->run();
        waitFor([&] { return finished; });
        settle(1000);
        monitor.end();
        fs::remove_all(work + "/split");
        return ok;
    }

    bool diff()
    {
        auto* page = window.diffPage();
        window.showView(View::Diff);
        page->setReferenceDir(QString::fromStdString(work + "/merged"));
        monitor.begin("diff");
        bool finished = false;
        PhaseConnections connections;
        connections.list.push_back(QObject::connect(page, &DiffPage::comparisonFinished, page, [&] { finished = true; }));
        connections.list.push_back(QObject::connect(page, &DiffPage::comparisonFailed, page, [&](const QString& m) {
            finished = true;
            std::cerr << m.toStdString() << "\n";
        }));
        const bool started = page->compare();
        waitFor([&] { return finished || !started; });
        settle(3000); // the detail of the most interesting tensor, computed after the table
        monitor.end();
        return started && page->report();
    }
};

} // namespace

int main(int argc, char** argv)
{
    std::string work = fs::temp_directory_path().string() + "/tessera-bench";
    double gb = 1.2, limitMs = 50;
    int ranks = 4;
    bool keep = false;
    if (!parseFlags(argc, argv, { { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks }, { "--limit_ms", &limitMs },
                                  { "--keep", &keep } })) {
        std::cerr << "usage: bench_gui_stalls [--work DIR] [--gb 1.2] [--ranks 4] [--limit_ms 50] [--keep]\n";
        return 2;
    }
    fs::create_directories(work);
    const std::string checkpoint = syntheticCheckpoint(work, gb, ranks);
    if (checkpoint.empty())
        return 3;

    StallMonitorApplication app(argc, argv);
    QStandardPaths::setTestModeEnabled(true); // the user's recent folders and window geometry stay as they are
    QCoreApplication::setOrganizationName(QStringLiteral("TesseraBench"));
    StallMonitor& monitor = app.monitor();
    monitor.limitMs = limitMs;
    MainWindow window;
    window.resize(1280, 720);
    window.show();
    settle(500);

    std::cout << "machine: " << QThread::idealThreadCount() << " cores, load " << loadAverage() << " before\n";
    Phases phases { window, monitor, work };
    bool ok = phases.scan(checkpoint) && phases.merge() && phases.split() && phases.diff();
    if (!keep)
        fs::remove_all(work + "/merged");
    std::cout << "\n";
    const bool withinLimit = monitor.report(std::cout, limitMs, loadAverage());
    if (!ok) {
        std::cerr << "a phase failed or timed out\n";
        return 3;
    }
    return withinLimit ? 0 : 1;
}
