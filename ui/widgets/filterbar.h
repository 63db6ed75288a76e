// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QRegularExpression>
#include <QTimer>
#include <QWidget>

class QCheckBox;
class QLineEdit;

namespace tessera::ui {

/// A filter box with a regex toggle. Typing is debounced (300 ms) so a 100,000-row proxy is refiltered once per
/// pause, not once per key; without the toggle the text is matched literally.
class FilterBar : public QWidget {
    Q_OBJECT
public:
    explicit FilterBar(QWidget* parent = nullptr);
    ~FilterBar() override;

    QRegularExpression expression() const;
    bool isRegex() const;
    void setRegex(bool regex);
    void setText(const QString& text);
    QLineEdit* lineEdit() const { return m_edit; }
    /// Applies pending text at once (tests, Enter key).
    void flush();

Q_SIGNALS:
    void filterChanged(const QRegularExpression& expression);
    void invalidRegex(const QString& message);

private:
    void apply();

    QLineEdit* m_edit;
    QCheckBox* m_regex;
    QTimer m_debounce;
};

} // namespace tessera::ui
