// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QStringList>
#include <QWidget>

class QLabel;
class QTextBrowser;

namespace tessera::ui {

/// The README this build was made from (embedded, with its screenshots), one `## ` section at a time, so the
/// Help menu can link each section and the text always matches the program.
class ReadmeWindow : public QWidget {
    Q_OBJECT
public:
    explicit ReadmeWindow(QWidget* parent = nullptr);
    ~ReadmeWindow() override;

    /// The section titles, in order; the first is the introduction above the first `## ` heading.
    static QStringList sectionTitles();
    /// Shows section `index` of sectionTitles().
    void showSection(int index);
    int currentSection() const { return m_current; }
    /// The Markdown of the section shown (for tests).
    QString currentMarkdown() const;

private:
    struct Section {
        QString title, markdown;
    };
    static QList<Section> sections();
    void fitToScreen();

    QLabel* m_navigation;
    QTextBrowser* m_text;
    int m_current = -1;
};

} // namespace tessera::ui
