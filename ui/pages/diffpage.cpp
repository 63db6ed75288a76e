// SPDX-License-Identifier: GPL-3.0-or-later
#include "diffpage.h"

#include "coreconvert.h"

#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace tessera::ui {

DiffPage::DiffPage(QWidget* parent) : QWidget(parent), m_left(new QLineEdit(this)), m_right(new QLineEdit(this))
{
    m_left->setReadOnly(true);
    m_right->setPlaceholderText(tr("a Hugging Face folder or another checkpoint (--reference DIR)"));
    auto* compare = new QPushButton(tr("Compare"), this);
    compare->setEnabled(false);
    compare->setToolTip(tr("The diff engine is not part of this build yet"));
    auto* note = new QLabel(tr("The diff view will list every tensor with its maximum absolute and relative error, "
                               "mark tensors outside the tolerances in red, and plot error histograms. It needs "
                               "the diff engine, which is not part of this build yet; `tessera diff A B` reports "
                               "the same."), this);
    note->setWordWrap(true);
    auto* form = new QFormLayout;
    form->addRow(tr("A (loaded)"), m_left);
    form->addRow(tr("B"), m_right);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 8, 10, 8);
    layout->addLayout(form);
    layout->addWidget(compare, 0, Qt::AlignLeft);
    layout->addWidget(note);
    layout->addStretch(1);
}

DiffPage::~DiffPage() = default;

void DiffPage::setCheckpoint(CheckpointPtr checkpoint) { m_left->setText(checkpoint ? qs(checkpoint->root) : QString()); }

void DiffPage::setReferenceDir(const QString& dir) { m_right->setText(dir); }

QString DiffPage::referenceDir() const { return m_right->text(); }

} // namespace tessera::ui
