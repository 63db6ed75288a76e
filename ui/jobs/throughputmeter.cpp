// SPDX-License-Identifier: GPL-3.0-or-later
#include "throughputmeter.h"

#include <QCoreApplication>

namespace tessera::ui {

void ThroughputMeter::start(std::uint64_t totalBytes)
{
    m_timer.start();
    m_total = totalBytes;
    m_lastBytes = 0;
    m_lastMs = 0;
    m_done = 0;
    m_rate = 0;
}

void ThroughputMeter::sample(std::uint64_t doneBytes, qint64 elapsedMs)
{
    m_done = doneBytes;
    const qint64 dt = elapsedMs - m_lastMs;
    if (dt < 250 || doneBytes < m_lastBytes)
        return;
    const double instant = double(doneBytes - m_lastBytes) * 1000.0 / double(dt);
    m_rate = m_rate <= 0 ? instant : 0.7 * m_rate + 0.3 * instant;
    m_lastBytes = doneBytes;
    m_lastMs = elapsedMs;
}

qint64 ThroughputMeter::etaSeconds() const
{
    if (m_rate <= 0 || m_total < m_done)
        return -1;
    return static_cast<qint64>(double(m_total - m_done) / m_rate + 0.5);
}

QString ThroughputMeter::text() const
{
    if (m_rate <= 0)
        return QCoreApplication::translate("ThroughputMeter", "measuring…");
    const qint64 eta = etaSeconds();
    const QString etaText = eta < 0 ? QStringLiteral("?")
                                    : QStringLiteral("%1:%2").arg(eta / 60).arg(eta % 60, 2, 10, QLatin1Char('0'));
    return QCoreApplication::translate("ThroughputMeter", "%1 GB/s · ETA %2")
        .arg(m_rate / 1e9, 0, 'f', 2)
        .arg(etaText);
}

} // namespace tessera::ui
