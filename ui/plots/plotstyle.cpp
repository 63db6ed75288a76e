// SPDX-License-Identifier: GPL-3.0-or-later
#include "plotstyle.h"

namespace tessera::ui {

QCPColorGradient colorGradient(std::initializer_list<std::pair<double, QColor>> stops)
{
    QCPColorGradient g;
    g.clearColorStops();
    for (const auto& [position, color] : stops)
        g.setColorStopAt(position, color);
    g.setNanHandling(QCPColorGradient::nhNanColor);
    g.setNanColor(QColor(0x80, 0x80, 0x80));
    return g;
}

void styleAxes(QCPAxisRect* rect, const QPalette& palette, const QFont& font)
{
    for (auto* axis : rect->axes()) {
        axis->setBasePen(QPen(palette.color(QPalette::Mid)));
        axis->setTickPen(QPen(palette.color(QPalette::Mid)));
        axis->setSubTickPen(QPen(palette.color(QPalette::Mid)));
        axis->setTickLabelColor(palette.color(QPalette::Text));
        axis->setLabelColor(palette.color(QPalette::Text));
        axis->setTickLabelFont(font);
        axis->setLabelFont(font);
        axis->grid()->setPen(QPen(palette.color(QPalette::Midlight), 0, Qt::DotLine));
    }
}

} // namespace tessera::ui
