// SPDX-License-Identifier: GPL-3.0-or-later
#include "layerposition.h"

#include <QRegularExpression>
#include <QStringList>

#include <algorithm>
#include <initializer_list>

namespace tessera::ui {

namespace {
/// The position of the first component named like one of `words` and followed by a number ("layers.3"), -1 if
/// none; the number in `value`.
int componentBefore(const QStringList& parts, std::initializer_list<QLatin1String> words, qlonglong* value)
{
    for (int i = 0; i + 1 < parts.size(); ++i) {
        if (std::find(words.begin(), words.end(), parts[i]) == words.end())
            continue;
        bool ok = false;
        const qlonglong number = parts[i + 1].toLongLong(&ok);
        if (ok && number >= 0) {
            *value = number;
            return i;
        }
    }
    return -1;
}
} // namespace

LayerPosition layerPosition(const QString& name)
{
    LayerPosition position;
    QStringList parts = name.split(QLatin1Char('.'));
    const int layerAt = componentBefore(parts, { QLatin1String("layers"), QLatin1String("layer"), QLatin1String("h"),
                                                 QLatin1String("blocks"), QLatin1String("blk") },
                                        &position.layer);
    const int expertAt = componentBefore(parts, { QLatin1String("experts"), QLatin1String("local_experts") },
                                         &position.expert);
    if (expertAt >= 0) {
        parts[expertAt + 1] = QStringLiteral("*");
    } else if (parts.contains(QLatin1String("experts")) && !parts.isEmpty()) {
        // Megatron's grouped experts number the parameter instead: "experts.linear_fc1.weight3".
        static const QRegularExpression trailing(QStringLiteral("^(weight|bias)(\\d+)$"));
        const auto match = trailing.match(parts.back());
        if (match.hasMatch()) {
            position.expert = match.captured(2).toLongLong();
            parts.back() = match.captured(1) + QLatin1Char('*');
        }
    }
    // A vision-language model numbers the layers of each tower from 0: the tower is part of the layer.
    position.vision = std::any_of(parts.begin(), parts.end(), [](const QString& part) {
        return part.startsWith(QLatin1String("vision")) || part == QLatin1String("visual");
    });
    if (layerAt >= 0)
        position.module = parts.mid(layerAt + 2).join(QLatin1Char('.'));
    return position;
}

} // namespace tessera::ui
