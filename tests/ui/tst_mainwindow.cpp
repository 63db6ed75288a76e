// SPDX-License-Identifier: GPL-3.0-or-later
#include "mainwindow.h"
#include "models/shardtreemodel.h"
#include "models/shardtreeproxy.h"
#include "jobs/mappingjob.h"
#include "ops/prepare_merge.h"
#include "pages/mappingpage.h"
#include "pages/mergepage.h"
#include "pages/placementpage.h"
#include "pages/summarypage.h"
#include "widgets/ruleseditor.h"
#include "pages/treepage.h"
#include "synthetic.h"
#include "testutil.h"
#include "models/difffilterproxy.h"
#include "models/difftablemodel.h"
#include "pages/splitpage.h"
#include "pages/diffpage.h"
#include "mappingfixtures.h"
#include "widgets/filterbar.h"
#include "widgets/meshview.h"
#include "widgets/placementview.h"
#include "widgets/statisticswindow.h"

#include <QApplication>
#include <QFileInfo>
#include <QImage>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTableView>
#include <QStandardPaths>
#include <QAction>
#include <QHeaderView>
#include <QPushButton>
#include <QTest>
#include <QTreeView>
#include <QSet>
#include <QTabWidget>
#include <QKeySequence>
#include <QLabel>
#include <QStatusBar>

using namespace tessera::ui;

class TestMainWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        // Keep the user's recent folders and window state out of tests.
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("TesseraTest"));
    }

    void opensAndShowsPlacement()
    {
        MainWindow window;
        window.resize(1200, 800);
        window.show();
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        window.openPath(QString::fromStdString(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        QVERIFY(window.checkpoint());
        QCOMPARE(window.checkpoint()->tensors.size(), std::size_t(51));
        QVERIFY(window.windowTitle().contains(QStringLiteral("actor")));

        window.showView(MainWindow::View::Placement);
        QCOMPARE(window.currentView(), MainWindow::View::Placement);
        auto* placement = window.placementPage();
        QVERIFY(placement->tensorIndex() >= 0);
        const auto& geometry = placement->placementView()->geometry();
        QCOMPARE(geometry.pieces.size(), std::size_t(2)); // two primaries, each with its replica listed
        QCOMPARE(geometry.pieces[0].replicas.size(), std::size_t(1));
        QVERIFY(geometry.gaps.empty());
        QVERIFY(placement->meshView()->meshText().contains(QStringLiteral("ddp=2")));

        // Hovering the top half names rank 0 and its file.
        auto* view = placement->placementView();
        QTRY_VERIFY(view->isVisible());
        QSignalSpy hover(view, &PlacementView::hoverChanged);
        // Just inside the drawing's top-left corner (the axes take 84 × 44 pixels).
        QTest::mouseMove(view, QPoint(96, 56));
        QTRY_VERIFY(hover.count() > 0);
        const int piece = hover.last().at(0).toInt();
        QVERIFY(piece >= 0);
        QVERIFY(hover.last().at(1).toString().contains(QStringLiteral("model_world_size_4_rank_")));
        const QImage image = view->grab().toImage();
        QVERIFY(!image.isNull());
    }

    void helpHasAGuideAndTheShortcuts()
    {
        MainWindow window;
        QVERIFY(window.guideHtml().contains(QStringLiteral("Open in Diff")));
        const QString shortcuts = window.shortcutsHtml();
        for (const char* expected : { "File → Open Folder…", "View → Merge", "Help → Quick Guide", "View → Filter Tensors" })
            QVERIFY2(shortcuts.contains(QString::fromUtf8(expected)), expected);
        QVERIFY(shortcuts.contains(QKeySequence(QKeySequence::Open).toString(QKeySequence::NativeText)));
        // The views' own shortcuts too: Ctrl+C copies names whole.
        QVERIFY2(shortcuts.contains(QStringLiteral("Copy Name")), qPrintable(shortcuts));
        QVERIFY(shortcuts.contains(QKeySequence(QKeySequence::Copy).toString(QKeySequence::NativeText)));
    }

    void mergeRefusalIsOnEveryPage()
    {
        // A rule that sends o_proj to q_proj: the merge refuses (missing and duplicate names), and the Summary,
        // the tree and the status bar say so, from the Merge page's own plan.
        MainWindow window;
        window.resize(1280, 720);
        window.show();
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        window.openPath(QString::fromStdString(tessera::test::fixture(tessera::test::kLegacy)));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        auto* summary = window.findChild<SummaryPage*>();
        auto* merge = window.findChild<MergePage*>();
        auto* mapping = window.findChild<MappingPage*>();
        QVERIFY(summary && merge && mapping);
        QTRY_VERIFY_WITH_TIMEOUT(merge->prepared() && !merge->isPlanning() && !mapping->job()->isBusy(), 60000);
        auto refusalShown = [&]() -> QStringList {
            QStringList shown { summary->html() };
            for (const QWidget* where : { static_cast<QWidget*>(window.treePage()), static_cast<QWidget*>(window.statusBar()) }) {
                QString text;
                for (const auto* label : where->findChildren<QLabel*>())
                    text += label->text();
                shown << text;
            }
            return shown;
        };
        for (const QString& text : refusalShown())
            QVERIFY2(!text.contains(QStringLiteral("merge would refuse"), Qt::CaseInsensitive), qPrintable(text));

        mapping->rulesEditor()->setPlainText(QStringLiteral(
            R"({ "rules": [ { "id": "o_proj", "megatron": "decoder.layers.{layer}.self_attention.linear_proj.weight",
                             "hf": "model.layers.{layer}.self_attn.q_proj.weight" } ] })"));
        mapping->flushRules();
        QTRY_VERIFY_WITH_TIMEOUT(!mapping->job()->isBusy() && !merge->isPlanning() && merge->prepared()
                                     && merge->prepared()->model.refusal,
                                 60000);
        QVERIFY(mapping->summaryText().contains(QStringLiteral("refuses")));
        for (const QString& text : refusalShown())
            QVERIFY2(text.contains(QStringLiteral("merge would refuse"), Qt::CaseInsensitive), qPrintable(text));

        // The rule removed, every page says it again: nothing to refuse.
        mapping->rulesEditor()->clear();
        mapping->flushRules();
        QTRY_VERIFY_WITH_TIMEOUT(!mapping->job()->isBusy() && !merge->isPlanning() && merge->prepared()
                                     && !merge->prepared()->model.refusal,
                                 60000);
        for (const QString& text : refusalShown())
            QVERIFY2(!text.contains(QStringLiteral("merge would refuse"), Qt::CaseInsensitive), qPrintable(text));
    }

    void treeSelectionDrivesPlacement()
    {
        MainWindow window;
        window.show();
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        window.openPath(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        auto* tree = window.treePage();
        tree->selectTensor(3);
        QCOMPARE(window.placementPage()->tensorIndex(), 3);

        // The filter is debounced: nothing changes until the timer fires (or flush()).
        auto* filter = tree->filterBar();
        filter->lineEdit()->setText(QStringLiteral("embed_tokens"));
        QVERIFY(tree->proxy()->filterRegularExpression().pattern().isEmpty());
        QTRY_VERIFY(!tree->proxy()->filterRegularExpression().pattern().isEmpty());
        const QModelIndex actor = tree->proxy()->mapFromSource(tree->model()->checkpointIndex());
        const QModelIndex firstFile = tree->proxy()->index(0, 0, actor);
        QCOMPARE(tree->proxy()->rowCount(firstFile), 1);
        // Tensor 3 is filtered out: the selection, and the Placement view with it, moves to what the filter shows.
        const int shown = window.placementPage()->tensorIndex();
        QVERIFY(shown >= 0);
        QCOMPARE(window.checkpoint()->tensors[std::size_t(shown)].name, std::string("model.embed_tokens.weight"));
        // A literal filter: "." is not a wildcard until Regex is on.
        filter->lineEdit()->setText(QStringLiteral("embed.tokens"));
        filter->flush();
        QCOMPARE(tree->proxy()->rowCount(), 0); // nothing matches, so not even the run row stays
        QCOMPARE(window.placementPage()->tensorIndex(), -1); // and the Placement view shows no tensor
        filter->setRegex(true);
        const QModelIndex actorAgain = tree->proxy()->mapFromSource(tree->model()->checkpointIndex());
        QCOMPARE(tree->proxy()->rowCount(tree->proxy()->index(0, 0, actorAgain)), 1);
    }

    void treeSelectionDrivesDiffAndSplit()
    {
        MainWindow window;
        window.show();
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        window.openPath(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        auto* diff = window.diffPage();
        diff->setReferenceDir(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/reference")));
        QSignalSpy finished(diff, &DiffPage::comparisonFinished);
        window.showView(MainWindow::View::Diff);
        QVERIFY(diff->compare());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        const std::string name = window.checkpoint()->tensors[5].name;
        window.treePage()->selectTensor(5);
        const QModelIndex current = diff->tableView()->currentIndex();
        QVERIFY(current.isValid());
        QCOMPARE(diff->model()->row(diff->proxy()->mapToSource(current).row())->name, name);
        // The Split page's placement drawing follows the tree too.
        window.showView(MainWindow::View::Split);
        window.treePage()->selectTensor(2);
        // The split is planned on a worker: the tensor chosen meanwhile is drawn once the plan arrives.
        QTRY_COMPARE_WITH_TIMEOUT(window.splitPage()->preview()->geometry().pieces.empty(), false, 60000);
    }

    void scanFailureIsReported()
    {
        MainWindow window;
        QSignalSpy failed(&window, &MainWindow::scanFailed);
        window.openPath(QStringLiteral("/nonexistent/checkpoint"));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 60000);
        QVERIFY(!window.checkpoint());
    }

    /// The page registry is the one list of views: each row names its view in View's order, names are unique and
    /// found again by name, each view has its tab, its View menu entry with its own Ctrl+digit, and its line in
    /// the guide.
    void pageRegistryIsTheOneListOfViews()
    {
        const auto& pages = workbenchPages();
        QSet<QString> names;
        QSet<int> digits;
        for (std::size_t i = 0; i < pages.size(); ++i) {
            QCOMPARE(static_cast<std::size_t>(pages[i].view), i);
            QCOMPARE(viewFromName(viewName(pages[i].view)), std::optional<View>(pages[i].view));
            names.insert(viewName(pages[i].view));
            digits.insert(pages[i].shortcutDigit);
        }
        QCOMPARE(std::size_t(names.size()), pages.size());
        QCOMPARE(std::size_t(digits.size()), pages.size());
        QVERIFY(!viewFromName(QStringLiteral("nope")));

        MainWindow window;
        auto* tabs = window.findChild<QTabWidget*>();
        QCOMPARE(std::size_t(tabs->count()), pages.size());
        const QString guide = window.guideHtml();
        const QString shortcuts = window.shortcutsHtml();
        for (std::size_t i = 0; i < pages.size(); ++i) {
            QCOMPARE(tabs->tabText(int(i)), workbenchText(pages[i].tabTitle));
            QVERIFY2(guide.contains(workbenchText(pages[i].guide)), pages[i].name);
            const QString menuEntry = workbenchText(pages[i].menuTitle).remove(QLatin1Char('&'));
            const QString key = QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_0 + pages[i].shortcutDigit))
                                    .toString(QKeySequence::NativeText)
                                    .toHtmlEscaped();
            QVERIFY2(shortcuts.contains(key + QStringLiteral("</b></td><td>View → ") + menuEntry.toHtmlEscaped()),
                     pages[i].name);
            window.showView(pages[i].view);
            QCOMPARE(window.currentView(), pages[i].view);
        }
    }

    void everyViewFitsA1280By720Window()
    {
        // The form pages scroll instead of forcing the window taller than the screen.
        MainWindow window;
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        window.openPath(QString::fromStdString(tessera::test::fixture(tessera::test::kLegacy)));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        window.resize(1280, 720);
        window.show();
        for (const auto& page : workbenchPages()) {
            const View view = page.view;
            window.showView(view);
            QCOMPARE(window.currentView(), view);
            QCoreApplication::processEvents();
            QVERIFY2(window.minimumSizeHint().height() <= 720 && window.minimumSizeHint().width() <= 1280,
                     page.name);
            QCOMPARE(window.size(), QSize(1280, 720));
        }
        // At the first window's split the Diff table shows the NaN and Inf counts without scrolling.
        window.setTreeShare(0.4);
        window.showView(MainWindow::View::Diff);
        QCoreApplication::processEvents();
        auto* table = window.diffPage()->tableView();
        for (const int column : { int(DiffTableModel::StatusColumn), int(DiffTableModel::NanColumn), int(DiffTableModel::InfColumn) })
            QVERIFY2(table->horizontalHeader()->sectionViewportPosition(column) + table->columnWidth(column)
                         <= table->viewport()->width(),
                     qPrintable(QString::number(column)));
        // The tree's filter box is readable even with the tree pane at its narrowest share.
        window.setTreeShare(0.2);
        QCoreApplication::processEvents();
        auto* filter = window.findChild<FilterBar*>();
        QVERIFY(filter);
        QVERIFY2(filter->lineEdit()->width() >= 150, qPrintable(QString::number(filter->lineEdit()->width())));
    }

    void placementViewEdgeCases()
    {
        PlacementView view;
        view.resize(400, 300);
        const auto info = tessera::test::smallCheckpoint();
        for (int t = 0; t < static_cast<int>(info->tensors.size()); ++t) {
            view.setTensor(info, t);
            QVERIFY(!view.grab().isNull()); // paints 2-D, 1-D bar, a gap, and a 0-dim cell
        }
        view.setTensor(info, 2);
        QCOMPARE(view.geometry().gaps.size(), std::size_t(1));
        view.setTensor(nullptr, -1);
        QVERIFY(!view.grab().isNull());
        MeshView mesh;
        mesh.setTensor(info, 3); // plain tensor: ranks in a row
        QCOMPARE(mesh.meshText(), QStringLiteral("fsdp=2"));
        QVERIFY(!mesh.grab().isNull());
    }

    void statisticsOfOneTensorWithoutB()
    {
        MainWindow window;
        window.show();
        QSignalSpy loaded(&window, &MainWindow::checkpointLoaded);
        window.openPath(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        // From the tree's context menu and from the Placement page.
        QStringList treeActions;
        for (auto* action : window.treePage()->view()->actions())
            treeActions << action->text();
        QVERIFY2(treeActions.contains(QStringLiteral("Statistics…")), qPrintable(treeActions.join(QLatin1Char(','))));
        QVERIFY(!window.placementPage()->statisticsButton()->isEnabled());
        window.treePage()->selectTensor(1);
        QVERIFY(window.placementPage()->statisticsButton()->isEnabled());
        QVERIFY(!window.statisticsWindow());
        window.placementPage()->statisticsButton()->click();
        auto* statistics = window.statisticsWindow();
        QVERIFY(statistics && statistics->isVisible());
        QSignalSpy shown(statistics, &StatisticsWindow::shown);
        QTRY_VERIFY_WITH_TIMEOUT(statistics->statsText().contains(QStringLiteral("mean")), 30000);
        const QString name = QString::fromStdString(window.checkpoint()->tensors[1].name);
        QVERIFY(statistics->titleText().contains(name));
        QVERIFY(statistics->statsText().contains(QStringLiteral("NaN")));
        // Another checkpoint: the window's tensor is gone with the old one.
        window.openPath(QString::fromStdString(tessera::test::fixture(tessera::test::kLegacy)));
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 2, 60000);
        QVERIFY(!statistics->isVisible());
    }

    void megatronMeshIsTheModelParallelGrid()
    {
        // TP × PP with each cell's mp_rank_* folder and coordinates; the piece's hover names them too.
        const auto legacy = tessera::test::scanFixture(tessera::test::kLegacy);
        MeshView mesh;
        mesh.setTensor(legacy, 0);
        QCOMPARE(mesh.meshText(), QStringLiteral("TP=2 × PP=2"));
        QCOMPARE(mesh.cellLabel(1), QStringLiteral("mp_rank_01_000\nTP 1 · PP 0"));
        QCOMPARE(mesh.cellLabel(2), QStringLiteral("mp_rank_00_001\nTP 0 · PP 1"));
        QVERIFY(!mesh.grab().isNull());
        PlacementView view;
        view.setTensor(legacy, 0);
        const QString hover = view.describePiece(0);
        QVERIFY2(hover.contains(QStringLiteral("(TP 0 · PP 0)")) && hover.contains(QStringLiteral("mp_rank_00_000/model.pt")),
                 qPrintable(hover));
        // Virtual stages are part of the grid's title; a DTensor checkpoint keeps its own mesh.
        const auto vpp = tessera::test::scanPath(std::string(TESSERA_TEST_DATA_DIR) + "/megatron_lm_llama_tp2_pp2_vpp2");
        mesh.setTensor(vpp, 0);
        QCOMPARE(mesh.meshText(), QStringLiteral("TP=2 × PP=2 × VPP=2"));
        mesh.setTensor(tessera::test::scanFixture("fsdp2_llama_w4/global_step_10/actor"), 0);
        QCOMPARE(mesh.cellLabel(0), QString());
    }

    void torchDistMeshIsTheModelParallelGridToo()
    {
        // torch_dist writes one file per global rank: the same TP × PP grid as the per-rank layout, in Megatron's
        // rank order (TP fastest), each cell with its coordinates.
        const auto dist = tessera::test::scanFixture(tessera::test::kDist);
        MeshView mesh;
        mesh.setTensor(dist, 0);
        QCOMPARE(mesh.meshText(), QStringLiteral("TP=2 × PP=2"));
        QCOMPARE(mesh.cellLabel(1), QStringLiteral("rank 1\nTP 1 · PP 0"));
        QCOMPARE(mesh.cellLabel(2), QStringLiteral("rank 2\nTP 0 · PP 1"));
        PlacementView view;
        view.setTensor(dist, 0);
        QVERIFY2(view.describePiece(0).contains(QStringLiteral(" (TP ")), qPrintable(view.describePiece(0)));
    }

    void screenshotCommand()
    {
        const QString png = QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/placement.png");
        QString err;
        const int code = tessera::test::runTessera(
            { QStringLiteral("gui"), QString::fromStdString(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")),
              QStringLiteral("--screenshot"), png, QStringLiteral("--view"), QStringLiteral("placement") },
            nullptr, &err);
        QVERIFY2(code == 0, qPrintable(err));
        const QImage image(png);
        QVERIFY(!image.isNull());
        QVERIFY(image.width() >= 1000);
        QCOMPARE(tessera::test::runTessera({ QStringLiteral("gui"), QStringLiteral("--view"), QStringLiteral("bogus"),
                                             QStringLiteral("--screenshot"), png, QStringLiteral("/tmp") }),
                 2);
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
