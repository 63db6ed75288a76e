// SPDX-License-Identifier: GPL-3.0-or-later
#include "elidingcombobox.h"

#include <QStyleOptionComboBox>
#include <QStylePainter>

namespace tessera::ui {

void ElidingComboBox::paintEvent(QPaintEvent*)
{
    // QComboBox's own painting, with the text shortened to the field the style gives it (the label is drawn a
    // pixel in from each side of it).
    QStylePainter painter(this);
    painter.setPen(palette().color(QPalette::Text));
    QStyleOptionComboBox option;
    initStyleOption(&option);
    painter.drawComplexControl(QStyle::CC_ComboBox, option);
    const QRect field = style()->subControlRect(QStyle::CC_ComboBox, &option, QStyle::SC_ComboBoxEditField, this);
    const int iconWidth = option.currentIcon.isNull() ? 0 : option.iconSize.width() + 4;
    option.currentText = fontMetrics().elidedText(option.currentText, Qt::ElideRight, field.width() - iconWidth - 2);
    painter.drawControl(QStyle::CE_ComboBoxLabel, option);
}

} // namespace tessera::ui
