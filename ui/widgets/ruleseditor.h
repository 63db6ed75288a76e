// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QPlainTextEdit>

namespace tessera::ui {

/// A plain-text editor for mapping rules JSON: monospace, line numbers in a gutter, and the line of the last
/// error marked in the gutter and underlined, so an error message's "line 12" can be found at a glance.
class RulesEditor : public QPlainTextEdit {
    Q_OBJECT
public:
    explicit RulesEditor(QWidget* parent = nullptr);
    ~RulesEditor() override;

    /// Marks 1-based `line` (0 clears), with the cursor column `column` when known.
    void setErrorLine(int line, int column = 0);
    int errorLine() const { return m_errorLine; }

    int gutterWidth() const;
    /// Paints the gutter; called by the gutter widget.
    void paintGutter(QPaintEvent* event, QWidget* gutter);

protected:
    void resizeEvent(QResizeEvent* event) override;
    void changeEvent(QEvent* event) override;

private:
    void updateGutterWidth();
    void updateGutter(const QRect& rect, int dy);
    void updateSelections();

    QWidget* m_gutter;
    int m_errorLine = 0;
    int m_errorColumn = 0;
};

} // namespace tessera::ui
