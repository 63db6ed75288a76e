// SPDX-License-Identifier: GPL-3.0-or-later
#include "democheckpoint.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

namespace tessera::ui {

namespace {
const QLatin1String kRun("fsdp2_llama_w4");

std::optional<DemoCheckpoint> demoIn(const QString& root)
{
    if (root.isEmpty())
        return std::nullopt;
    const QDir run(QDir(root).filePath(kRun));
    DemoCheckpoint demo{ QDir::cleanPath(run.filePath(QStringLiteral("global_step_10/actor"))),
                         QDir::cleanPath(run.filePath(QStringLiteral("reference"))) };
    // Both halves, or the demo cannot show what it is for (a merge that is checked).
    if (!QFileInfo(QDir(demo.checkpoint).filePath(QStringLiteral("model_world_size_4_rank_0.pt"))).isFile()
        || !QFileInfo(QDir(demo.reference).filePath(QStringLiteral("model.safetensors"))).isFile())
        return std::nullopt;
    return demo;
}
} // namespace

std::optional<DemoCheckpoint> findDemoCheckpoint(const QString& demoRoot)
{
    if (!demoRoot.isEmpty())
        return demoIn(demoRoot);
    // An installed executable first (PREFIX/bin/tessera beside PREFIX/share/tessera/demo), so a package or a
    // `cmake --install` tree finds its own demo; then the source tree of a build that was not installed.
    QStringList roots;
    if (QCoreApplication::instance())
        roots << QCoreApplication::applicationDirPath() + QStringLiteral("/../share/tessera/demo");
#ifdef TESSERA_SOURCE_DEMO_DIR
    roots << QStringLiteral(TESSERA_SOURCE_DEMO_DIR);
#endif
    for (const QString& data : QStandardPaths::standardLocations(QStandardPaths::GenericDataLocation))
        roots << data + QStringLiteral("/tessera/demo");
    for (const QString& root : roots)
        if (auto demo = demoIn(root))
            return demo;
    return std::nullopt;
}

} // namespace tessera::ui
