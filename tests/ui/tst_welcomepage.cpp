// SPDX-License-Identifier: GPL-3.0-or-later
// The first run: the welcome page before any checkpoint (open, drop, recent folders, the demo), and the Help
// menu's Read Me and version.
#include "democheckpoint.h"
#include "mainwindow.h"
#include "pages/diffpage.h"
#include "pages/welcomepage.h"
#include "testutil.h"
#include "widgets/readmewindow.h"

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QDropEvent>
#include <QImage>
#include <QMenu>
#include <QMenuBar>
#include <QMimeData>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTest>
#include <QTextBrowser>
#include <QUrl>

using namespace tessera::ui;

namespace {
QAction* menuAction(QMenuBar* bar, const QString& menuTitle, const QString& text)
{
    for (QAction* top : bar->actions())
        if (top->menu() && top->text().remove(QLatin1Char('&')) == menuTitle)
            for (QAction* action : top->menu()->actions())
                if (action->text().remove(QLatin1Char('&')) == text)
                    return action;
    return nullptr;
}
} // namespace

class TestWelcomePage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("TesseraWelcomeTest"));
        QCoreApplication::setApplicationVersion(QStringLiteral("9.8.7"));
    }

    void init() { QSettings().clear(); }

    void startsOnTheWelcomePage()
    {
        MainWindow window;
        window.show();
        QVERIFY(window.isWelcomeShown());
        auto* welcome = window.welcomePage();
        QVERIFY(welcome->isVisible());
        QVERIFY(welcome->openButton()->isEnabled());
        // Run from a build, the demo is the source tree's.
        QVERIFY(findDemoCheckpoint().has_value());
        QVERIFY(welcome->demoButton()->isEnabled());
        QVERIFY(welcome->recentButtons().isEmpty());
        // The icon it shows (and the window's) is linked in.
        QVERIFY(QFile::exists(QStringLiteral(":/tessera/icons/tessera.svg")));
        QVERIFY(!window.windowIcon().isNull());
        // Choosing a view leaves the welcome page for the (empty) workbench.
        window.showView(MainWindow::View::Merge);
        QVERIFY(!window.isWelcomeShown());
    }

    void theDemoOpensWithItsReference()
    {
        const auto demo = findDemoCheckpoint();
        QVERIFY(demo);
        QVERIFY(QFileInfo(demo->checkpoint).isDir());
        QVERIFY(QFileInfo(demo->reference + QStringLiteral("/model.safetensors")).isFile());
        MainWindow window;
        window.show();
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        QTest::mouseClick(window.welcomePage()->demoButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        QVERIFY(!window.isWelcomeShown());
        QCOMPARE(window.checkpoint()->layout, std::string("verl-fsdp"));
        QCOMPARE(window.diffPage()->referenceDir(), demo->reference);
        // It is a recent folder now, on the welcome page too.
        QCOMPARE(window.welcomePage()->recentButtons().size(), 1);
        QVERIFY(window.welcomePage()->recentButtons().first()->text().contains(QStringLiteral("global_step_10/actor")));
    }

    void noDemoDisablesItsButton()
    {
        QVERIFY(!findDemoCheckpoint(QDir::tempPath() + QStringLiteral("/no-such-demo")));
        WelcomePage page;
        page.setDemoPath({});
        QVERIFY(!page.demoButton()->isEnabled());
        page.setDemoPath(QStringLiteral("/somewhere/actor"));
        QVERIFY(page.demoButton()->isEnabled());
    }

    void recentFoldersAreListedAndOpen()
    {
        const QString actor = QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor"));
        const QString gone = QDir::tempPath() + QStringLiteral("/tessera-no-such-run/global_step_1/actor");
        QSettings().setValue(QStringLiteral("recentFolders"), QStringList{ actor, gone });
        MainWindow window;
        window.show();
        const auto buttons = window.welcomePage()->recentButtons();
        QCOMPARE(buttons.size(), 2);
        QVERIFY(buttons[0]->isEnabled());
        QVERIFY(buttons[0]->text().contains(QDir::toNativeSeparators(actor)));
        QVERIFY(!buttons[1]->isEnabled()); // the folder is gone
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        QTest::mouseClick(buttons[0], Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        QVERIFY(!window.isWelcomeShown());
        QCOMPARE(window.checkpoint()->tensors.empty(), false);
    }

    void aFolderDroppedOnTheWelcomePageOpens()
    {
        MainWindow window;
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        const QString actor = QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor"));
        QMimeData mime;
        mime.setUrls({ QUrl::fromLocalFile(actor) });
        // Dropped on the page itself (a child that does not take drops): the window takes it.
        QWidget* target = window.welcomePage()->demoButton();
        const QPoint at = target->rect().center();
        QDragEnterEvent enter(at, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(target, &enter);
        QVERIFY(enter.isAccepted());
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        QDropEvent drop(QPointF(at), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(target, &drop);
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        QCOMPARE(QFileInfo(QString::fromStdString(window.checkpoint()->root)).canonicalFilePath(),
                 QFileInfo(actor).canonicalFilePath());
        QVERIFY(!window.isWelcomeShown());
    }

    void aFolderThatCannotBeReadShowsWhy()
    {
        MainWindow window;
        window.show();
        QSignalSpy failed(&window, &MainWindow::scanFailed);
        window.openPath(QDir::tempPath() + QStringLiteral("/tessera-no-such-folder"));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 60000);
        QVERIFY(!window.isWelcomeShown()); // the summary says what is wrong
    }

    void helpLinksTheReadmeSectionsAndShowsTheVersion()
    {
        const QStringList sections = ReadmeWindow::sectionTitles();
        for (const char* title : { "Set-up", "Workbench", "Command line", "Reliability", "Architecture" })
            QVERIFY2(sections.contains(QString::fromUtf8(title)), title);
        MainWindow window;
        auto* version = menuAction(window.menuBar(), QStringLiteral("Help"), QStringLiteral("Version 9.8.7"));
        QVERIFY(version);
        auto* readme = menuAction(window.menuBar(), QStringLiteral("Help"), QStringLiteral("Read Me"));
        QVERIFY(readme && readme->menu());
        QStringList linked;
        for (QAction* action : readme->menu()->actions())
            linked << action->text();
        QCOMPARE(linked, sections);

        // Set-up shows the README's own commands; Workbench its screenshots, fitted to the window.
        readme->menu()->actions().at(int(sections.indexOf(QStringLiteral("Set-up"))))->trigger();
        auto* shown = window.readmeWindow();
        QVERIFY(shown && shown->isVisible());
        QVERIFY(shown->windowTitle().contains(QStringLiteral("9.8.7")));
        QVERIFY(shown->currentMarkdown().startsWith(QStringLiteral("## Set-up")));
        QVERIFY(shown->currentMarkdown().contains(QStringLiteral("packaging/install-deps.sh")));
        window.showReadme(int(sections.indexOf(QStringLiteral("Workbench"))));
        QVERIFY(shown->currentMarkdown().contains(QStringLiteral("docs/screenshots/tree.png")));
        auto* browser = shown->findChild<QTextBrowser*>();
        QVERIFY(browser);
        const QImage image = browser->loadResource(QTextDocument::ImageResource, QUrl(QStringLiteral("docs/screenshots/tree.png")))
                                 .value<QImage>();
        QVERIFY(!image.isNull());
        QVERIFY(image.width() <= 960);
    }

    void theCommandLineRendersTheWelcomePageAndSaysItsVersion()
    {
        const QString png = QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/welcome.png");
        QString out, err;
        QCOMPARE(tessera::test::runTessera({ QStringLiteral("gui"), QStringLiteral("--screenshot"), png }, &out, &err), 0);
        const QImage image(png);
        QVERIFY2(!image.isNull(), qPrintable(err));
        QCOMPARE(image.size(), QSize(1440, 880));
        QCOMPARE(tessera::test::runTessera({ QStringLiteral("--version") }, &out), 0);
        QVERIFY2(QRegularExpression(QStringLiteral("^tessera \\d+\\.\\d+\\.\\d+$")).match(out.trimmed()).hasMatch(),
                 qPrintable(out));
        QCOMPARE(tessera::test::runTessera({ QStringLiteral("--help") }, &out), 0);
        QVERIFY(out.contains(QStringLiteral("--version")));
    }
};

QTEST_MAIN(TestWelcomePage)
#include "tst_welcomepage.moc"
