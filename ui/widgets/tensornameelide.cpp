// SPDX-License-Identifier: GPL-3.0-or-later
#include "tensornameelide.h"

#include <QApplication>
#include <QFontMetrics>
#include <QHash>
#include <QPainter>
#include <QStyle>

#include <algorithm>
#include <vector>

namespace tessera::ui {

namespace {
bool isIndex(const QString& part)
{
    if (part.isEmpty())
        return false;
    for (const QChar c : part)
        if (!c.isDigit())
            return false;
    return true;
}

/// A mixture-of-experts module ("experts", "shared_experts", "local_experts").
bool isExpertPart(const QString& part) { return part.contains(QLatin1String("expert")); }

/// PEFT's own components: the module before them is the projection that tells rows apart.
bool isLoraPart(const QString& part)
{
    return part.startsWith(QLatin1String("lora_")) || part == QLatin1String("base_layer");
}

QString render(const QStringList& parts, const std::vector<bool>& dropped)
{
    QString out;
    bool previousDropped = false;
    for (int i = 0; i < parts.size(); ++i) {
        if (dropped[std::size_t(i)]) {
            if (!previousDropped)
                out += out.isEmpty() ? QStringLiteral("…") : QStringLiteral(".…");
            previousDropped = true;
            continue;
        }
        if (!out.isEmpty() && !previousDropped)
            out += QLatin1Char('.');
        out += parts[i];
        previousDropped = false;
    }
    return out;
}
} // namespace

QString compactTensorName(const QString& name, const std::function<bool(const QString&)>& fits,
                          const QString& sharedPrefix)
{
    if (fits(name))
        return name;
    const QStringList parts = name.split(QLatin1Char('.'));
    const int n = int(parts.size());
    if (n < 3)
        return name;

    // Leading components all rows share; at least the last two always stay.
    const QStringList shared = sharedPrefix.split(QLatin1Char('.'), Qt::SkipEmptyParts);
    int sharedCount = 0;
    while (sharedCount < shared.size() && sharedCount < n - 2 && parts[sharedCount] == shared[sharedCount])
        ++sharedCount;

    // An experts module stays unless an index or another experts module follows it: it tells a shared expert's
    // linear_fc1 from the routed experts' and from the dense MLP's.
    auto namesExperts = [&](int i) {
        return isExpertPart(parts[i]) && !(i + 1 < n && (isIndex(parts[i + 1]) || isExpertPart(parts[i + 1])));
    };
    auto kept = [&](int i) {
        return i == 0 || i >= n - 2 || isIndex(parts[i]) || isLoraPart(parts[i])
            || (i + 1 < n && isLoraPart(parts[i + 1])) || namesExperts(i);
    };
    std::vector<int> order;
    for (int i = 0; i < sharedCount; ++i)
        order.push_back(i);
    std::vector<int> namingAnIndex;
    for (int i = sharedCount; i < n; ++i) {
        if (kept(i))
            continue;
        if (i + 1 < n && isIndex(parts[i + 1]))
            namingAnIndex.push_back(i);
        else
            order.push_back(i);
    }
    order.insert(order.end(), namingAnIndex.begin(), namingAnIndex.end());

    std::vector<bool> dropped(std::size_t(n), false);
    QString shortest = name;
    for (int i : order) {
        dropped[std::size_t(i)] = true;
        shortest = render(parts, dropped);
        if (fits(shortest))
            return shortest;
    }
    return shortest;
}

QString cutTensorName(const QString& compact, const std::function<bool(const QString&)>& fits)
{
    if (fits(compact))
        return compact;
    // The leading components that fit, then "…": the first index stays as long as anything does.
    const QStringList parts = compact.split(QLatin1Char('.'));
    const QString ellipsis = QStringLiteral("…");
    for (qsizetype keep = parts.size() - 1; keep > 0; --keep) {
        QStringList head = parts.mid(0, keep);
        if (head.last() != ellipsis)
            head << ellipsis;
        const QString cut = head.join(QLatin1Char('.'));
        if (fits(cut))
            return cut;
    }
    return ellipsis;
}

namespace {
/// True when a name that does not continue `prefix` with `next` has an index of its own: another stack of layers
/// (a vision tower beside the language model), whose rows would read like the others' once `next` is dropped.
bool anotherStackBeside(const QStringList& names, const QString& prefix, const QString& next)
{
    for (const QString& name : names) {
        if (!name.startsWith(prefix) || name.startsWith(next))
            continue;
        const QStringList rest = name.mid(prefix.size()).split(QLatin1Char('.'));
        if (std::any_of(rest.begin(), rest.end(), isIndex))
            return true;
    }
    return false;
}
} // namespace

QString sharedNamePrefix(const QStringList& names)
{
    // Grown one component at a time while most names continue it, and no other stack of layers beside it.
    QString prefix;
    for (int depth = 0;; ++depth) {
        QHash<QString, qsizetype> next;
        for (const QString& name : names) {
            if (!name.startsWith(prefix))
                continue;
            const qsizetype dot = name.indexOf(QLatin1Char('.'), prefix.size());
            if (dot < 0)
                continue; // a parameter name is never a prefix
            ++next[name.left(dot + 1)];
        }
        QString best;
        qsizetype bestCount = 0;
        for (auto it = next.cbegin(); it != next.cend(); ++it)
            if (it.value() > bestCount || (it.value() == bestCount && it.key() < best)) {
                best = it.key();
                bestCount = it.value();
            }
        if (bestCount == 0 || bestCount * 2 <= names.size() || anotherStackBeside(names, prefix, best))
            return prefix;
        prefix = best;
    }
}

int compactNamesWidth(const QStringList& names, const QString& sharedPrefix, const QFontMetrics& metrics)
{
    const auto nothingFits = [](const QString&) { return false; };
    int widest = 0;
    for (const QString& name : names)
        widest = std::max(widest, metrics.horizontalAdvance(compactTensorName(name, nothingFits, sharedPrefix)));
    // The style's text margins (QCommonStyle's viewItemDrawText) and a little air.
    const int margin = QApplication::style()->pixelMetric(QStyle::PM_FocusFrameHMargin) + 1;
    return widest + 2 * margin + 8;
}

TensorNameDelegate::TensorNameDelegate(QObject* parent) : QStyledItemDelegate(parent) { }

void TensorNameDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const
{
    QStyleOptionViewItem opt(option);
    initStyleOption(&opt, index);
    const QWidget* widget = option.widget;
    QStyle* style = widget ? widget->style() : QApplication::style();
    const QRect textRect = style->subElementRect(QStyle::SE_ItemViewItemText, &opt, widget);
    // The style insets the text by the focus frame's margin on both sides (QCommonStyle's viewItemDrawText).
    const int margin = style->pixelMetric(QStyle::PM_FocusFrameHMargin, nullptr, widget) + 1;
    // The style lays the text out with fractional advances and elides on its own measure, a pixel or two above
    // horizontalAdvance(): a name measured to fit within those pixels would still be cut mid-word.
    constexpr int kLayoutSlack = 3;
    const int width = textRect.width() - 2 * margin - kLayoutSlack;
    const QFontMetrics metrics(opt.font);
    if (metrics.horizontalAdvance(opt.text) > width) {
        const auto fits = [&](const QString& text) { return metrics.horizontalAdvance(text) <= width; };
        // A compacted name that still does not fit loses whole components on the right, so its first kept index
        // stays and no word is cut; other text (file and rank rows) keeps the view's own elision.
        const QString compact = cutTensorName(compactTensorName(opt.text, fits, m_sharedPrefix), fits);
        if (compact != opt.text) {
            opt.text = compact;
            opt.textElideMode = Qt::ElideRight;
        }
    }
    style->drawControl(QStyle::CE_ItemViewItem, &opt, painter, widget);
}

} // namespace tessera::ui
