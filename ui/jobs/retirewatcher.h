// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QFutureWatcher>
#include <QObject>

namespace tessera::ui {

/// Lets go of the watcher of a canceled or superseded run without waiting for its worker: the watcher stops
/// reporting to `job` and deletes itself once its future ends (at once if it already has).
template <typename T>
void retireWatcher(QFutureWatcher<T>* watcher, QObject* job)
{
    watcher->disconnect(job);
    QObject::connect(watcher, &QFutureWatcher<T>::finished, watcher, &QObject::deleteLater);
    if (watcher->isFinished())
        watcher->deleteLater();
}

} // namespace tessera::ui
