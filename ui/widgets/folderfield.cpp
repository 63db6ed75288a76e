// SPDX-License-Identifier: GPL-3.0-or-later
#include "folderfield.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QWidget>

namespace tessera::ui {

QWidget* withButton(QWidget* field, QPushButton* button, QWidget* parent)
{
    auto* box = new QWidget(parent);
    auto* layout = new QHBoxLayout(box);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(field, 1);
    layout->addWidget(button);
    // Tab goes from the field to its button, wherever the button was created.
    QWidget::setTabOrder(field, button);
    return box;
}

QWidget* withBrowse(QLineEdit* edit, QWidget* parent, const std::function<QString()>& fallback)
{
    auto* browse = new QPushButton(QObject::tr("Browse…"), parent);
    QObject::connect(browse, &QPushButton::clicked, edit, [edit, fallback] {
        const QString start = !edit->text().trimmed().isEmpty() ? edit->text().trimmed() : fallback ? fallback() : QString();
        const QString dir = QFileDialog::getExistingDirectory(edit, QObject::tr("Choose a folder"), start);
        if (!dir.isEmpty())
            edit->setText(dir);
    });
    return withButton(edit, browse, parent);
}

} // namespace tessera::ui
