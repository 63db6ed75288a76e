// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QWidget>

class QLabel;
class QPushButton;
class QVBoxLayout;

namespace tessera::ui {

/// What the workbench shows before any checkpoint is loaded: open a folder, drop one, the recent checkpoints,
/// the bundled demo, and where to read more. The page only asks; the main window opens.
class WelcomePage : public QWidget {
    Q_OBJECT
public:
    explicit WelcomePage(QWidget* parent = nullptr);
    ~WelcomePage() override;

    /// The recently opened folders, newest first (folders that are gone are shown, disabled).
    void setRecent(const QStringList& folders);
    /// The demo's actor folder, or empty when no demo is installed (the button is then disabled and says why).
    void setDemoPath(const QString& checkpoint);

    QPushButton* openButton() const { return m_open; }
    QPushButton* demoButton() const { return m_demo; }
    /// One button per recent folder, in order.
    QList<QPushButton*> recentButtons() const { return m_recentButtons; }

Q_SIGNALS:
    void openFolderRequested();
    void openDemoRequested();
    void openPathRequested(const QString& path);
    void guideRequested();
    void readmeRequested();

private:
    QPushButton* m_open;
    QPushButton* m_demo;
    QLabel* m_demoNote;
    QVBoxLayout* m_recentLayout;
    QLabel* m_noRecent;
    QList<QPushButton*> m_recentButtons;
};

} // namespace tessera::ui
