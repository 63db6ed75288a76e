// SPDX-License-Identifier: GPL-3.0-or-later
#include "ruleseditor.h"

#include "rankcolors.h"

#include <QPaintEvent>
#include <QPainter>
#include <QTextBlock>

namespace tessera::ui {

namespace {
/// The line-number strip left of the text; all drawing is the editor's, which knows the block geometry.
class Gutter : public QWidget {
public:
    explicit Gutter(RulesEditor* editor) : QWidget(editor), m_editor(editor) { }
    QSize sizeHint() const override { return { m_editor->gutterWidth(), 0 }; }

protected:
    void paintEvent(QPaintEvent* event) override { m_editor->paintGutter(event, this); }

private:
    RulesEditor* m_editor;
};
} // namespace

RulesEditor::RulesEditor(QWidget* parent) : QPlainTextEdit(parent), m_gutter(new Gutter(this))
{
    QFont mono(QStringLiteral("monospace"));
    mono.setStyleHint(QFont::TypeWriter);
    setFont(mono);
    setLineWrapMode(QPlainTextEdit::NoWrap);
    setTabStopDistance(fontMetrics().horizontalAdvance(QLatin1Char(' ')) * 2);
    connect(this, &QPlainTextEdit::blockCountChanged, this, &RulesEditor::updateGutterWidth);
    connect(this, &QPlainTextEdit::updateRequest, this, &RulesEditor::updateGutter);
    updateGutterWidth();
}

RulesEditor::~RulesEditor() = default;

int RulesEditor::gutterWidth() const
{
    int digits = 1;
    for (int max = qMax(1, blockCount()); max >= 10; max /= 10)
        ++digits;
    return 12 + fontMetrics().horizontalAdvance(QLatin1Char('9')) * qMax(3, digits);
}

void RulesEditor::setErrorLine(int line, int column)
{
    if (line == m_errorLine && column == m_errorColumn)
        return;
    m_errorLine = line;
    m_errorColumn = column;
    updateSelections();
    m_gutter->update();
}

void RulesEditor::updateGutterWidth() { setViewportMargins(gutterWidth(), 0, 0, 0); }

void RulesEditor::updateGutter(const QRect& rect, int dy)
{
    if (dy)
        m_gutter->scroll(0, dy);
    else
        m_gutter->update(0, rect.y(), m_gutter->width(), rect.height());
}

void RulesEditor::resizeEvent(QResizeEvent* event)
{
    QPlainTextEdit::resizeEvent(event);
    const QRect cr = contentsRect();
    m_gutter->setGeometry(QRect(cr.left(), cr.top(), gutterWidth(), cr.height()));
}

void RulesEditor::changeEvent(QEvent* event)
{
    QPlainTextEdit::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        updateSelections();
        m_gutter->update();
    }
}

void RulesEditor::updateSelections()
{
    QList<QTextEdit::ExtraSelection> selections;
    const QTextBlock block = document()->findBlockByNumber(m_errorLine - 1);
    if (m_errorLine > 0 && block.isValid()) {
        QColor tint = problemColor(palette());
        tint.setAlpha(40);
        QTextEdit::ExtraSelection line;
        line.format.setBackground(tint);
        line.format.setProperty(QTextFormat::FullWidthSelection, true);
        line.cursor = QTextCursor(block);
        selections << line;
        if (m_errorColumn > 0) {
            QTextEdit::ExtraSelection at;
            at.format.setUnderlineStyle(QTextCharFormat::WaveUnderline);
            at.format.setUnderlineColor(problemColor(palette()));
            at.cursor = QTextCursor(block);
            at.cursor.movePosition(QTextCursor::Right, QTextCursor::MoveAnchor, qMin(m_errorColumn - 1, block.length() - 1));
            at.cursor.movePosition(QTextCursor::EndOfWord, QTextCursor::KeepAnchor);
            if (!at.cursor.hasSelection())
                at.cursor.movePosition(QTextCursor::Right, QTextCursor::KeepAnchor);
            selections << at;
        }
    }
    setExtraSelections(selections);
}

void RulesEditor::paintGutter(QPaintEvent* event, QWidget* gutter)
{
    QPainter painter(gutter);
    const QPalette pal = palette();
    painter.fillRect(event->rect(), pal.color(QPalette::Window));
    QTextBlock block = firstVisibleBlock();
    int number = block.blockNumber();
    int top = qRound(blockBoundingGeometry(block).translated(contentOffset()).top());
    int bottom = top + qRound(blockBoundingRect(block).height());
    const int width = gutter->width() - 6;
    while (block.isValid() && top <= event->rect().bottom()) {
        if (block.isVisible() && bottom >= event->rect().top()) {
            const bool error = number + 1 == m_errorLine;
            if (error) {
                painter.fillRect(QRect(0, top, gutter->width(), bottom - top), problemColor(pal));
                painter.setPen(textColorOn(problemColor(pal)));
            } else {
                painter.setPen(pal.color(QPalette::PlaceholderText));
            }
            painter.drawText(0, top, width, fontMetrics().height(), Qt::AlignRight, QString::number(number + 1));
        }
        block = block.next();
        top = bottom;
        bottom = top + qRound(blockBoundingRect(block).height());
        ++number;
    }
}

} // namespace tessera::ui
