// SPDX-License-Identifier: GPL-3.0-or-later
#include "confirm.h"

#include <QMessageBox>

namespace tessera::ui {

ConfirmFn& confirmHook()
{
    static ConfirmFn hook = [](QWidget* parent, const QString& title, const QString& question) {
        return QMessageBox::question(parent, title, question, QMessageBox::Yes | QMessageBox::No, QMessageBox::No)
            == QMessageBox::Yes;
    };
    return hook;
}

bool confirm(QWidget* parent, const QString& title, const QString& question)
{
    return confirmHook()(parent, title, question);
}

} // namespace tessera::ui
