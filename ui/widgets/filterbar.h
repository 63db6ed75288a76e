// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QRegularExpression>
#include <QTimer>
#include <QWidget>

class QCheckBox;
class QLabel;
class QLineEdit;

namespace tessera::ui {

/// A filter box with a regex toggle. Typing is debounced (300 ms) so a 100,000-row proxy is refiltered once per
/// pause, not once per key; without the toggle the text is matched literally. An invalid regex filters out every
/// row (the rows of the previous filter would answer a question the user no longer asks) and says why beside the
/// box.
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
    /// Why the regex is invalid, as shown beside the box; empty while it is valid.
    QString errorText() const;

    /// What filterChanged() sends for an invalid regex: a valid expression that matches no row.
    static QRegularExpression matchNothing();

Q_SIGNALS:
    void filterChanged(const QRegularExpression& expression);
    /// Sent after filterChanged(matchNothing()) when the regex does not compile.
    void invalidRegex(const QString& message);

private:
    void apply();

    QLineEdit* m_edit;
    QCheckBox* m_regex;
    QLabel* m_error;
    QTimer m_debounce;
};

} // namespace tessera::ui
