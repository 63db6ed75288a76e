// SPDX-License-Identifier: GPL-3.0-or-later
#include "filterbar.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>

namespace tessera::ui {

FilterBar::FilterBar(QWidget* parent)
    : QWidget(parent), m_edit(new QLineEdit(this)), m_regex(new QCheckBox(tr("Regex"), this)), m_error(new QLabel(this))
{
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_edit->setPlaceholderText(tr("Filter tensors, files, ranks… (Ctrl+F)"));
    m_edit->setClearButtonEnabled(true);
    m_regex->setToolTip(tr("Match the filter as a regular expression"));
    layout->addWidget(m_edit, 1);
    layout->addWidget(m_regex);
    layout->addWidget(m_error);
    m_error->setStyleSheet(QStringLiteral("QLabel { color: #d03030; }"));
    m_error->hide();
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
        const QString why = tr("invalid regex: %1").arg(re.errorString());
        m_edit->setToolTip(why);
        m_edit->setStyleSheet(QStringLiteral("QLineEdit { color: #d03030; }"));
        m_error->setText(why);
        m_error->show();
        Q_EMIT filterChanged(matchNothing());
        Q_EMIT invalidRegex(re.errorString());
        return;
    }
    m_edit->setToolTip({});
    m_edit->setStyleSheet({});
    m_error->clear();
    m_error->hide();
    Q_EMIT filterChanged(re);
}

QString FilterBar::errorText() const { return m_error->text(); }

QRegularExpression FilterBar::matchNothing()
{
    // An empty lookahead that fails: it compiles, and no text (not even an empty one) matches it.
    return QRegularExpression(QStringLiteral("(?!)"));
}

} // namespace tessera::ui
