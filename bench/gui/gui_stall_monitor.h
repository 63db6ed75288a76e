// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What bench_gui_stalls measures: the gaps between turns of the GUI thread's event loop (a 1 ms precise timer that
// notes how late each of its ticks comes) and the time each event takes to deliver (QApplication::notify), per
// named phase, so that a stall is reported with the object and event that caused it.

#include <QApplication>
#include <QElapsedTimer>
#include <QEvent>
#include <QMetaEnum>
#include <QThread>
#include <QTimer>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace tessera::bench {

/// One slow delivery: who received what, and for how long.
struct SlowEvent {
    double ms = 0;
    std::string what;
};

/// One long gap between two turns of the event loop, and what the GUI thread did in it: `cpuMs` on the CPU,
/// `queuedMs` ready to run but waiting for a core (the scheduler's share; the rest it slept: on a lock, the disk,
/// the X server), `eventsMs` delivering events, the slowest of them `worst`.
struct Gap {
    double ms = 0, cpuMs = 0, queuedMs = 0, eventsMs = 0;
    SlowEvent worst;
};

/// The longest gaps and slowest events of one phase.
struct PhaseStalls {
    std::string name;
    double seconds = 0;
    double longestGapMs = 0;
    int gapsOverLimit = 0;
    std::vector<Gap> longest;       ///< the longest gaps, longest first
    std::vector<SlowEvent> slowest; ///< events over 20 ms, slowest first
};

/// Keeps the `keep` largest of `list` by `key`, largest first, after adding `item`.
template <typename T, typename Key>
void keepLargest(std::vector<T>& list, T item, std::size_t keep, Key key)
{
    list.push_back(std::move(item));
    std::sort(list.begin(), list.end(), [&](const T& a, const T& b) { return key(a) > key(b); });
    if (list.size() > keep)
        list.pop_back();
}

/// The calling thread's time on a CPU and waiting in the run queue for one, in ms (Linux schedstat).
struct ThreadTimes {
    double cpuMs = 0, queuedMs = 0;
};
inline ThreadTimes threadTimes()
{
    char text[128] = {};
    const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY);
    if (fd < 0)
        return {};
    const ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    unsigned long long onCpu = 0, queued = 0;
    if (n <= 0 || std::sscanf(text, "%llu %llu", &onCpu, &queued) != 2)
        return {};
    return { onCpu / 1e6, queued / 1e6 };
}

class StallMonitor {
public:
    StallMonitor()
    {
        m_ticker.setTimerType(Qt::PreciseTimer);
        m_ticker.setInterval(1);
        QObject::connect(&m_ticker, &QTimer::timeout, [this] { tick(); });
    }

    void begin(const std::string& phase)
    {
        m_phases.push_back({ phase, 0, 0, 0, {}, {} });
        m_phaseClock.start();
        m_sinceTick.start();
        m_atTick = threadTimes();
        m_gapEvents = {};
        m_ticker.start();
        std::cout << phase << "…\n" << std::flush;
    }

    void end()
    {
        m_ticker.stop();
        m_phases.back().seconds = m_phaseClock.elapsed() / 1000.0;
    }

    /// One delivered event, timed by the application; only those of the outermost event loop count (a nested
    /// loop's events are inside its caller's time).
    void delivered(double ms, const std::string& what)
    {
        if (m_phases.empty() || !m_ticker.isActive())
            return;
        m_gapEvents.eventsMs += ms;
        if (ms > m_gapEvents.worst.ms)
            m_gapEvents.worst = { ms, what };
        if (ms >= 20)
            keepLargest(m_phases.back().slowest, SlowEvent { ms, what }, 8, [](const SlowEvent& e) { return e.ms; });
    }

    /// Prints every phase; true when no phase's longest gap exceeds `limitMs`.
    bool report(std::ostream& out, double limitMs, const std::string& loadAfter) const
    {
        bool within = true;
        out << "phase    seconds  longest gap   gaps > " << limitMs << " ms\n";
        for (const auto& p : m_phases) {
            char line[160];
            std::snprintf(line, sizeof line, "%-8s %7.1f  %8.1f ms   %d\n", p.name.c_str(), p.seconds, p.longestGapMs,
                          p.gapsOverLimit);
            out << line;
            within = within && p.longestGapMs <= limitMs;
        }
        out << "machine load after: " << loadAfter << " (1-minute average) on " << QThread::idealThreadCount()
            << " cores\n";
        for (const auto& p : m_phases) {
            if (!p.longest.empty())
                out << "\nlongest gaps during " << p.name
                    << " (ms: gap; GUI thread on a CPU, waiting for one, delivering events; slowest event):\n";
            for (const auto& g : p.longest) {
                char line[96];
                std::snprintf(line, sizeof line, "  %7.1f  %7.1f %7.1f %7.1f  %6.1f ", g.ms, g.cpuMs, g.queuedMs,
                              g.eventsMs, g.worst.ms);
                out << line << g.worst.what << "\n";
            }
            if (p.slowest.empty())
                continue;
            out << "\nslowest deliveries during " << p.name << ":\n";
            for (const auto& s : p.slowest) {
                char line[64];
                std::snprintf(line, sizeof line, "  %8.1f ms  ", s.ms);
                out << line << s.what << "\n";
            }
        }
        return within;
    }

    double limitMs = 50;

private:
    void tick()
    {
        // The gap is the time since the previous tick less the timer's own interval.
        const double gap = m_sinceTick.nsecsElapsed() / 1e6 - 1.0;
        const ThreadTimes times = threadTimes();
        m_sinceTick.start();
        auto& p = m_phases.back();
        p.longestGapMs = std::max(p.longestGapMs, gap);
        if (gap > limitMs)
            ++p.gapsOverLimit;
        if (gap > 20) {
            Gap g = m_gapEvents;
            g.ms = gap;
            g.cpuMs = times.cpuMs - m_atTick.cpuMs;
            g.queuedMs = times.queuedMs - m_atTick.queuedMs;
            keepLargest(p.longest, g, 6, [](const Gap& x) { return x.ms; });
        }
        m_atTick = threadTimes();
        m_gapEvents = {};
    }

    QTimer m_ticker;
    QElapsedTimer m_phaseClock, m_sinceTick;
    ThreadTimes m_atTick;
    Gap m_gapEvents; ///< the events delivered since the last tick
    std::vector<PhaseStalls> m_phases;
};

/// The application, timing every event it delivers on the GUI thread.
class StallMonitorApplication : public QApplication {
public:
    using QApplication::QApplication;

    StallMonitor& monitor()
    {
        if (!m_monitor)
            m_monitor = std::make_unique<StallMonitor>();
        return *m_monitor;
    }

    bool notify(QObject* receiver, QEvent* event) override
    {
        if (m_depth > 0 || !m_monitor || QThread::currentThread() != thread())
            return QApplication::notify(receiver, event);
        ++m_depth;
        QElapsedTimer clock;
        clock.start();
        const QEvent::Type type = event->type();
        const QString receiverName = describe(receiver);
        const bool result = QApplication::notify(receiver, event);
        --m_depth;
        m_monitor->delivered(clock.nsecsElapsed() / 1e6, receiverName.toStdString() + " " + eventName(type));
        return result;
    }

private:
    static QString describe(QObject* receiver)
    {
        QString name = QString::fromLatin1(receiver->metaObject()->className());
        if (!receiver->objectName().isEmpty())
            name += QStringLiteral(" '") + receiver->objectName() + QStringLiteral("'");
        if (QObject* parent = receiver->parent())
            name += QStringLiteral(" in ") + QString::fromLatin1(parent->metaObject()->className());
        return name;
    }

    static std::string eventName(QEvent::Type type)
    {
        const char* key = QMetaEnum::fromType<QEvent::Type>().valueToKey(type);
        return key ? key : std::to_string(int(type));
    }

    std::unique_ptr<StallMonitor> m_monitor;
    int m_depth = 0;
};

} // namespace tessera::bench
