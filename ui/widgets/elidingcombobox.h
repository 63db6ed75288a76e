// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QComboBox>

namespace tessera::ui {

/// A combo box whose closed face ends its text with "…" when the text is wider than the box, where QComboBox cuts
/// it off mid-letter; the list shows every item whole. For choices whose items carry a description after the name.
class ElidingComboBox : public QComboBox {
    Q_OBJECT
public:
    using QComboBox::QComboBox;

protected:
    void paintEvent(QPaintEvent* event) override;
};

} // namespace tessera::ui
