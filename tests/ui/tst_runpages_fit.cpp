// SPDX-License-Identifier: GPL-3.0-or-later
// The Merge and Split pages at 1280×720, as a new user meets them: the run button, its status line and the command
// line are in sight without scrolling, Tab reaches every field and Browse button and then the run button (the plan
// tables are one stop each, not a walk through their rows), and options that do not apply to the chosen format
// are disabled.

#include "mainwindow.h"
#include "mappingfixtures.h"
#include "pages/mergepage.h"
#include "pages/splitpage.h"
#include "testutil.h"

#include <QAbstractItemView>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTest>

#include <memory>

using namespace tessera::ui;

namespace {

QPushButton* button(const QWidget& page, const QString& text)
{
    for (auto* b : page.findChildren<QPushButton*>())
        if (b->text() == text)
            return b;
    return nullptr;
}

/// `w` is shown whole in its window: no scroll area or splitter cuts it off.
bool inSight(const QWidget* w)
{
    return w && w->isVisible() && w->visibleRegion().boundingRect() == w->rect()
        && w->window()->rect().contains(QRect(w->mapTo(w->window(), QPoint(0, 0)), w->size()));
}

/// Scrolls every scroll area inside `page` to its end, as a user reading the plan or the log does.
void scrollToEnd(QWidget* page)
{
    for (auto* area : page->findChildren<QScrollArea*>())
        area->verticalScrollBar()->setValue(area->verticalScrollBar()->maximum());
    QCoreApplication::processEvents();
}

/// The widget showing the command line `text` starts with.
QWidget* commandLineWidget(const QWidget& page, const QString& start)
{
    for (auto* edit : page.findChildren<QLineEdit*>())
        if (edit->text().startsWith(start))
            return edit;
    for (auto* label : page.findChildren<QLabel*>())
        if (label->text().startsWith(start))
            return label;
    return nullptr;
}

/// The widgets Tab walks through from `first`, in order, until it comes back or leaves `page`.
QList<QWidget*> tabChain(QWidget* page, QWidget* first)
{
    QList<QWidget*> chain;
    QWidget* w = first;
    for (int i = 0; i < 200 && w; ++i) {
        if (page->isAncestorOf(w) && w->isVisible() && w->isEnabled() && (w->focusPolicy() & Qt::TabFocus))
            chain << w;
        w = w->nextInFocusChain();
        if (w == first)
            break;
    }
    return chain;
}

/// `window` with the checkpoint `fixture` open, shown at 1280×720.
void openAt1280By720(MainWindow& window, const std::string& fixture)
{
    QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
    window.openPath(QString::fromStdString(tessera::test::fixture(fixture)));
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    window.resize(1280, 720);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
}

/// What a scroll area of `page` cuts off at the right, its contents being wider than it (the pages scroll only
/// up and down); empty when nothing is.
QString cutAtTheRight(const QWidget& page)
{
    for (auto* area : page.findChildren<QScrollArea*>())
        if (area->widget() && area->widget()->width() > area->viewport()->width())
            return QStringLiteral("%1 pixels wide in a %2-pixel view")
                .arg(area->widget()->width())
                .arg(area->viewport()->width());
    return {};
}

} // namespace

class TestRunPagesFit : public QObject {
    Q_OBJECT
private Q_SLOTS:
    /// Point 11: at 1280×720 the Split and Merge buttons, their status lines and command lines are in sight.
    void runButtonsAndCommandLinesInSightAt1280By720()
    {
        MainWindow window;
        openAt1280By720(window, "fsdp2_llama_w4/global_step_10/actor");
        if (QTest::currentTestFailed())
            return;

        window.showView(MainWindow::View::Split);
        QTest::qWait(50);
        SplitPage* split = window.splitPage();
        QTRY_VERIFY_WITH_TIMEOUT(!split->isPlanning(), 60000);
        QVERIFY2(inSight(button(*split, QStringLiteral("Split"))), "the Split button");
        QVERIFY2(inSight(commandLineWidget(*split, QStringLiteral("tessera split"))), "the split command line");
        // … read from its start.
        QCOMPARE(qobject_cast<QLineEdit*>(commandLineWidget(*split, QStringLiteral("tessera split")))->cursorPosition(), 0);
        scrollToEnd(split);
        QVERIFY2(inSight(button(*split, QStringLiteral("Split"))), "the Split button, scrolled");
        QVERIFY2(inSight(commandLineWidget(*split, QStringLiteral("tessera split"))), "the split command line, scrolled");

        window.showView(MainWindow::View::Merge);
        QTest::qWait(50);
        auto* merge = window.findChild<MergePage*>();
        QVERIFY(merge);
        QTRY_VERIFY_WITH_TIMEOUT(!merge->isPlanning(), 60000);
        QVERIFY2(inSight(button(*merge, QStringLiteral("Merge"))), "the Merge button");
        QVERIFY2(inSight(commandLineWidget(*merge, QStringLiteral("tessera merge"))), "the merge command line");
        scrollToEnd(merge);
        QVERIFY2(inSight(button(*merge, QStringLiteral("Merge"))), "the Merge button, scrolled");
        QVERIFY2(inSight(commandLineWidget(*merge, QStringLiteral("tessera merge"))), "the merge command line, scrolled");
    }

    /// A long refusal (a GGUF export of a checkpoint without a tokenizer, naming its config folder) wraps in the
    /// plan box and the status line: the page stays as wide as the window, nothing is cut at the right.
    void longRefusalFitsAt1280By720()
    {
        MainWindow window;
        openAt1280By720(window, "fsdp2_llama_w4/global_step_10/actor");
        if (QTest::currentTestFailed())
            return;
        window.showView(MainWindow::View::Merge);
        auto* merge = window.findChild<MergePage*>();
        QVERIFY(merge);
        merge->setTargetDir(QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/out"));
        for (auto* format : merge->findChildren<QComboBox*>())
            if (const int gguf = format->findData(QStringLiteral("gguf")); gguf >= 0)
                format->setCurrentIndex(gguf);
        QTRY_VERIFY_WITH_TIMEOUT(!merge->isPlanning() && merge->statusText().startsWith(QStringLiteral("Refused")), 60000);
        QTest::qWait(100);
        QVERIFY2(window.width() <= 1280, qPrintable(QString::number(window.width())));
        QVERIFY2(cutAtTheRight(*merge).isEmpty(), qPrintable(cutAtTheRight(*merge)));
        QVERIFY2(inSight(button(*merge, QStringLiteral("Merge"))), "the Merge button");
        QVERIFY2(merge->width() <= window.width(), qPrintable(QString::number(merge->width())));
    }

    /// The GGUF type choice, its items naming each type's size and what it is for, leaves the options as wide as
    /// the page: with the tree taking its first-run share (2/5) of a 1280×720 window, nothing is cut at the right.
    void ggufTypeChoiceFitsAt1280By720()
    {
        MainWindow window;
        openAt1280By720(window, "gguf_llama_w2_fp32/global_step_10/actor");
        if (QTest::currentTestFailed())
            return;
        window.setTreeShare(0.4);
        window.showView(MainWindow::View::Merge);
        auto* merge = window.findChild<MergePage*>();
        QVERIFY(merge);
        QComboBox* outtype = nullptr;
        for (auto* box : merge->findChildren<QComboBox*>()) {
            if (const int gguf = box->findData(QStringLiteral("gguf")); gguf >= 0)
                box->setCurrentIndex(gguf);
            if (box->findData(QStringLiteral("q4_k_m")) >= 0)
                outtype = box;
        }
        QVERIFY(outtype);
        QTRY_VERIFY_WITH_TIMEOUT(!merge->isPlanning() && merge->ggufPlan(), 60000);
        QTest::qWait(100);
        QVERIFY2(outtype->currentText().contains(QStringLiteral(" KB — ")), qPrintable(outtype->currentText()));
        QVERIFY2(cutAtTheRight(*merge).isEmpty(), qPrintable(cutAtTheRight(*merge)));
        QVERIFY2(inSight(outtype), "the GGUF type choice");
        QVERIFY2(inSight(button(*merge, QStringLiteral("Merge"))), "the Merge button");
    }

    /// Point 12: Tab reaches each Browse button right after its folder field, the plan tables are one stop each,
    /// and the run button comes after the options and the plan.
    void tabReachesBrowseButtonsAndTheRunButton_data()
    {
        QTest::addColumn<bool>("merge");
        QTest::newRow("Merge page") << true;
        QTest::newRow("Split page") << false;
    }

    void tabReachesBrowseButtonsAndTheRunButton()
    {
        QFETCH(bool, merge);
        const CheckpointPtr checkpoint = tessera::test::scanFixture("fsdp2_llama_w4/global_step_10/actor");
        std::unique_ptr<QWidget> page;
        const QString target = QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/out");
        if (merge) {
            auto* p = new MergePage;
            p->setCheckpoint(checkpoint);
            p->setTargetDir(target);
            page.reset(p);
        } else {
            auto* p = new SplitPage;
            p->setCheckpoint(checkpoint);
            p->setTargetDir(target);
            page.reset(p);
        }
        QTRY_VERIFY_WITH_TIMEOUT(merge ? !static_cast<MergePage*>(page.get())->isPlanning()
                                       : !static_cast<SplitPage*>(page.get())->isPlanning(),
                                 60000);
        page->resize(1200, 900);
        page->show();
        QVERIFY(QTest::qWaitForWindowExposed(page.get()));
        // From the page's first stop, as Tab walks it when the page is shown.
        const QList<QWidget*> chain = tabChain(page.get(), page->nextInFocusChain());
        QVERIFY(!chain.isEmpty());
        const auto browse = page->findChildren<QPushButton*>();
        int browseButtons = 0;
        for (auto* b : browse) {
            if (b->text() != QStringLiteral("Browse…"))
                continue;
            ++browseButtons;
            // A Browse button is usable exactly when its field is (a base model's only for a LoRA checkpoint).
            auto* field = b->parentWidget()->findChild<QLineEdit*>();
            QVERIFY(field);
            QCOMPARE(b->isEnabled(), field->isEnabled());
            if (!b->isEnabled())
                continue;
            const int at = int(chain.indexOf(b));
            QVERIFY2(at > 0, "a Browse button Tab never reaches");
            QVERIFY2(qobject_cast<QLineEdit*>(chain.at(at - 1)), "a Browse button away from its folder field");
        }
        QVERIFY(browseButtons >= 1);
        for (auto* view : page->findChildren<QAbstractItemView*>())
            QVERIFY2(!view->tabKeyNavigation(), "Tab walks a table's rows");
        QPushButton* run = button(*page, merge ? QStringLiteral("Merge") : QStringLiteral("Split"));
        const int runAt = int(chain.indexOf(run));
        QVERIFY(runAt >= 0);
        for (auto* edit : page->findChildren<QLineEdit*>())
            if (chain.contains(edit) && !edit->isReadOnly())
                QVERIFY2(chain.indexOf(edit) < runAt, qPrintable(edit->placeholderText()));
    }

    /// Point 12: with GGUF chosen, the safetensors-only options (shard size, dtype, replica check) are disabled,
    /// and the command line does not carry them.
    void safetensorsOptionsDisabledForGguf()
    {
        MergePage page;
        page.setCheckpoint(tessera::test::scanFixture("gguf_llama_w2_fp32/global_step_10/actor"));
        QLineEdit* shardSize = nullptr;
        for (auto* edit : page.findChildren<QLineEdit*>())
            if (edit->text() == QStringLiteral("5GB"))
                shardSize = edit;
        QCheckBox* verify = nullptr;
        for (auto* box : page.findChildren<QCheckBox*>())
            if (box->text() == QStringLiteral("--verify-replicas"))
                verify = box;
        QComboBox* format = nullptr;
        for (auto* box : page.findChildren<QComboBox*>())
            if (box->findData(QStringLiteral("gguf")) >= 0)
                format = box;
        QVERIFY(shardSize && verify && format);
        shardSize->setText(QStringLiteral("1GB"));
        verify->setChecked(true);
        QVERIFY(page.commandLine().contains(QStringLiteral("--max_shard_size 1GB")));
        format->setCurrentIndex(format->findData(QStringLiteral("gguf")));
        QVERIFY(!shardSize->isEnabled());
        QVERIFY(!verify->isEnabled());
        QVERIFY(!page.commandLine().contains(QStringLiteral("--max_shard_size")));
        QVERIFY(!page.commandLine().contains(QStringLiteral("--verify_replicas")));
        format->setCurrentIndex(0);
        QVERIFY(shardSize->isEnabled());
        QVERIFY(verify->isEnabled());
        // Another checkpoint starts over in safetensors, with its options enabled.
        format->setCurrentIndex(format->findData(QStringLiteral("gguf")));
        page.setCheckpoint(tessera::test::scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        QVERIFY(shardSize->isEnabled());
        QVERIFY(verify->isEnabled());
        QTRY_VERIFY_WITH_TIMEOUT(!page.isPlanning(), 60000);
    }
};

QTEST_MAIN(TestRunPagesFit)
#include "tst_runpages_fit.moc"
