// SPDX-License-Identifier: GPL-3.0-or-later
// The Help menu's Read Me window: it opens inside the screen (a 1280×720 laptop too) and Esc or Ctrl+W close it,
// as any help window does.
#include "mainwindow.h"
#include "widgets/readmewindow.h"

#include <QApplication>
#include <QKeySequence>
#include <QScreen>
#include <QSettings>
#include <QStandardPaths>
#include <QTest>

using namespace tessera::ui;

namespace {
/// The Read Me window of `window`, opened from the Help menu's first section and active, as a user sees it.
ReadmeWindow* openReadme(MainWindow& window)
{
    window.show();
    window.showReadme(0);
    ReadmeWindow* readme = window.readmeWindow();
    if (!readme)
        return nullptr;
    readme->activateWindow();
    return QTest::qWaitForWindowActive(readme) ? readme : nullptr;
}
} // namespace

class TestReadmeWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("TesseraReadmeTest"));
    }

    void init() { QSettings().clear(); }

    void opensInsideTheScreen()
    {
        MainWindow window;
        ReadmeWindow* readme = openReadme(window);
        QVERIFY(readme);
        const QRect available = readme->screen()->availableGeometry();
        QVERIFY2(readme->frameGeometry().height() <= available.height(),
                 qPrintable(QStringLiteral("%1 px tall on a screen of %2")
                                .arg(readme->frameGeometry().height())
                                .arg(available.height())));
        QVERIFY(readme->frameGeometry().width() <= available.width());
        // Nothing in it forces a window taller or wider than a 1280×720 screen.
        QVERIFY(readme->minimumSizeHint().height() <= 720 * 9 / 10);
        QVERIFY(readme->minimumSizeHint().width() <= 1280 * 9 / 10);
    }

    void escapeClosesIt()
    {
        MainWindow window;
        ReadmeWindow* readme = openReadme(window);
        QVERIFY(readme);
        QTest::keyClick(readme, Qt::Key_Escape);
        QVERIFY(!readme->isVisible());
        QVERIFY(window.isVisible());
    }

    void ctrlWClosesIt()
    {
        MainWindow window;
        ReadmeWindow* readme = openReadme(window);
        QVERIFY(readme);
        QTest::keySequence(readme, QKeySequence(QKeySequence::Close));
        QVERIFY(!readme->isVisible());
        QVERIFY(window.isVisible());
        // It opens again at the section asked for.
        window.showReadme(1);
        QVERIFY(readme->isVisible());
        QCOMPARE(readme->currentSection(), 1);
    }
};

QTEST_MAIN(TestReadmeWindow)
#include "tst_readmewindow.moc"
