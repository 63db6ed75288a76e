// SPDX-License-Identifier: GPL-3.0-or-later
#include "provenance.h"

#include "formats/layout_registry.h"
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

namespace tessera::ui {

namespace {

/// Reports are a few hundred bytes per tensor; anything far larger is not one.
constexpr qint64 kMaxReportBytes = 256ll << 20;

} // namespace

Provenance readProvenance(const tessera::CheckpointInfo& info)
{
    Provenance p;
    if (!tessera::isHuggingFaceLayout(info.layout))
        return p;
    const QFileInfo root(QString::fromStdString(info.root));
    const QDir folder(root.isDir() ? root.absoluteFilePath() : root.absolutePath());
    QFile file(folder.filePath(QStringLiteral("merge_report.json")));
    if (!file.exists() || file.size() > kMaxReportBytes || !file.open(QIODevice::ReadOnly))
        return p;
    const QJsonDocument doc = QJsonDocument::fromJson(file.readAll());
    if (!doc.isObject())
        return p;
    const QJsonObject report = doc.object();
    p.version = report.value(QStringLiteral("tessera_version")).toString();
    for (const auto& modelValue : report.value(QStringLiteral("models")).toArray()) {
        const QJsonObject model = modelValue.toObject();
        if (!model.value(QStringLiteral("folder")).toString().isEmpty())
            continue; // an adapter beside the model describes other files
        p.found = true;
        p.checkpoint = model.value(QStringLiteral("checkpoint")).toString();
        p.layout = model.value(QStringLiteral("layout")).toString();
        for (const auto& tensorValue : model.value(QStringLiteral("tensors")).toArray()) {
            const QJsonObject t = tensorValue.toObject();
            QString text = QStringLiteral("merged from ")
                + (t.contains(QStringLiteral("source")) ? t.value(QStringLiteral("source")).toString()
                                                        : t.value(QStringLiteral("name")).toString());
            if (t.contains(QStringLiteral("rule")))
                text += QStringLiteral(" (rule %1, %2)").arg(t.value(QStringLiteral("rule")).toString(),
                                                             t.value(QStringLiteral("transform")).toString());
            text += QStringLiteral(", %1 piece(s) by %2 copy")
                        .arg(t.value(QStringLiteral("steps")).toArray().size())
                        .arg(t.value(QStringLiteral("mode")).toString());
            if (t.contains(QStringLiteral("crc32")))
                text += QStringLiteral(", CRC-32 %1").arg(t.value(QStringLiteral("crc32")).toString());
            p.tensors.insert(t.value(QStringLiteral("name")).toString(), text);
        }
    }
    return p;
}

} // namespace tessera::ui
