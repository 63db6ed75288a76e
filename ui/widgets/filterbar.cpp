// SPDX-License-Identifier: GPL-3.0-or-later
#include "filterbar.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLineEdit>

namespace tessera::ui {

FilterBar::FilterBar(QWidget* parent) : QWidget(parent), m_edit(new QLineEdit(this)), m_regex(new QCheckBox(tr("Regex"), this))
{
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_edit->setPlaceholderText(tr("Filter tensors, files, ranks… (Ctrl+F)"));
    m_edit->setClearButtonEnabled(true);
    m_regex->setToolTip(tr("Match the filter as a regular expression"));
    layout->addWidget(m_edit, 1);
    layout->addWidget(m_regex);
    m_debounce.setSingleShot(true);
    m_debounce.setInterval(300);
    connect(&m_debounce, &QTimer::timeout, this, &FilterBar::apply);
    connect(m_edit, &QLineEdit::textChanged, this, [this] { m_debounce.start(); });
    connect(m_edit, &QLineEdit::returnPressed, this, &FilterBar::flush);
    connect(m_regex, &QCheckBox::toggled, this, &FilterBar::apply);
}

FilterBar::~FilterBar() = default;

QRegularExpression FilterBar::expression() const
{
    const QString text = m_edit->text();
    return QRegularExpression(m_regex->isChecked() ? text : QRegularExpression::escape(text),
                              QRegularExpression::CaseInsensitiveOption);
}

bool FilterBar::isRegex() const { return m_regex->isChecked(); }

void FilterBar::setRegex(bool regex) { m_regex->setChecked(regex); }

void FilterBar::setText(const QString& text) { m_edit->setText(text); }

void FilterBar::flush()
{
    m_debounce.stop();
    apply();
}

void FilterBar::apply()
{
    m_debounce.stop();
    const QRegularExpression re = expression();
    if (!re.isValid()) {
        m_edit->setToolTip(re.errorString());
        m_edit->setStyleSheet(QStringLiteral("QLineEdit { color: #d03030; }"));
        Q_EMIT invalidRegex(re.errorString());
        return;
    }
    m_edit->setToolTip({});
    m_edit->setStyleSheet({});
    Q_EMIT filterChanged(re);
}

} // namespace tessera::ui
