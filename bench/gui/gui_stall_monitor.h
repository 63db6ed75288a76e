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

/// The longest gaps and slowest events of one phase.
struct PhaseStalls {
    std::string name;
    double seconds = 0;
    double longestGapMs = 0;
    int gapsOverLimit = 0;
    std::vector<double> gapsMs;     ///< every gap over 20 ms, in order
    std::vector<SlowEvent> slowest; ///< events over 20 ms, slowest first
};

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
        if (m_phases.empty() || !m_ticker.isActive() || ms < 20)
            return;
        auto& slow = m_phases.back().slowest;
        slow.push_back({ ms, what });
        std::sort(slow.begin(), slow.end(), [](const SlowEvent& a, const SlowEvent& b) { return a.ms > b.ms; });
        if (slow.size() > 8)
            slow.pop_back();
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
        out << "machine load after: " << loadAfter << " (1-minute average) on " << QThread::idealThreadCount() << " cores\n";
        for (const auto& p : m_phases) {
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
        m_sinceTick.start();
        auto& p = m_phases.back();
        p.longestGapMs = std::max(p.longestGapMs, gap);
        if (gap > limitMs)
            ++p.gapsOverLimit;
        if (gap > 20)
            p.gapsMs.push_back(gap);
    }

    QTimer m_ticker;
    QElapsedTimer m_phaseClock, m_sinceTick;
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
