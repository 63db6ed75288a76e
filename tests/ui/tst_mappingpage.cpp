// SPDX-License-Identifier: GPL-3.0-or-later
#include "jobs/mappingjob.h"
#include "mappingfixtures.h"
#include "mapping/megatron_mapping.h"
#include "models/mappingfilterproxy.h"
#include "models/mappingmodel.h"
#include "pages/mappingpage.h"
#include "formats/scan.h"
#include "testutil.h"
#include "widgets/filterbar.h"
#include "widgets/ruleseditor.h"

#include <QAbstractItemModelTester>
#include <QAction>
#include <QClipboard>
#include <QComboBox>
#include <QGuiApplication>
#include <QLineEdit>
#include <QScrollBar>
#include <QTableView>
#include <QSignalSpy>
#include <QTest>

using namespace tessera::ui;
using tessera::MappingStatus;

using tessera::test::countStatus;
using tessera::test::kDist;
using tessera::test::kLegacy;
using tessera::test::scanFixture;

class TestMappingPage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void editingRulesChangesTheTable()
    {
        MappingPage page;
        QAbstractItemModelTester tester(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester proxyTester(page.proxy(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy finished(page.job(), &MappingJob::finished);
        page.setCheckpoint(scanFixture(kLegacy));
        QTRY_VERIFY(!page.job()->isBusy());
        const int rows = page.model()->rowCount();
        QVERIFY(rows > 10);
        QCOMPARE(countStatus(*page.model(), MappingStatus::Unmapped), 0);
        QVERIFY2(page.summaryText().contains(QStringLiteral("every name maps")), qPrintable(page.summaryText()));

        // Typing is debounced: one evaluation after the pause, and the table follows the rules.
        const int before = finished.count();
        page.rulesEditor()->setPlainText(QStringLiteral("{ \"rules\": [ { \"id\": \"o_proj\", "));
        page.rulesEditor()->setPlainText(QStringLiteral("{ \"rules\": [ { \"id\": \"o_proj\", \"remove\": true } ] }"));
        QTRY_VERIFY_WITH_TIMEOUT(countStatus(*page.model(), MappingStatus::Unmapped) > 0, 5000);
        QTRY_VERIFY(!page.job()->isBusy());
        QCOMPARE(finished.count(), before + 1);
        const int unmapped = countStatus(*page.model(), MappingStatus::Unmapped);
        const int missing = countStatus(*page.model(), MappingStatus::Missing);
        QVERIFY(missing > 0);
        QVERIFY2(page.summaryText().contains(QStringLiteral("unmapped")), qPrintable(page.summaryText()));
        QVERIFY(page.summaryText().contains(QStringLiteral("a merge refuses")));
        QVERIFY(page.errorText().isEmpty());

        // The status combo filters; its entries carry the counts.
        QComboBox* combo = page.statusCombo();
        combo->setCurrentIndex(combo->findData(int(MappingStatus::Unmapped)));
        QCOMPARE(page.proxy()->rowCount(), unmapped);
        QVERIFY(combo->currentText().contains(QString::number(unmapped)));
        combo->setCurrentIndex(combo->findData(int(MappingFilterProxy::ProblemStatuses)));
        QCOMPARE(page.proxy()->rowCount(), unmapped + missing);
        page.filterBar()->setText(QStringLiteral("layers.1."));
        page.filterBar()->flush();
        QVERIFY(page.proxy()->rowCount() > 0 && page.proxy()->rowCount() < unmapped + missing);
        page.filterBar()->setText(QString());
        page.filterBar()->flush();
        combo->setCurrentIndex(0);
        QCOMPARE(page.proxy()->rowCount(), page.model()->rowCount());

        // A syntax error is shown with its line; the table keeps the last rules that worked.
        page.rulesEditor()->setPlainText(QStringLiteral("{\n  \"rules\": [\n    { \"id\": \"o_proj\" \"remove\": true }\n  ]\n}"));
        page.flushRules();
        QTRY_VERIFY(!page.job()->isBusy());
        QVERIFY2(page.errorText().startsWith(QStringLiteral("Line 3, column")), qPrintable(page.errorText()));
        QCOMPARE(page.rulesEditor()->errorLine(), 3);
        QCOMPARE(countStatus(*page.model(), MappingStatus::Unmapped), unmapped);
        QVERIFY(!page.job()->outcome().mapped); // and a merge would not run on it

        // Clearing the editor goes back to the built-in rules.
        page.rulesEditor()->clear();
        page.flushRules();
        QTRY_VERIFY(!page.job()->isBusy());
        QCOMPARE(countStatus(*page.model(), MappingStatus::Unmapped), 0);
        QCOMPARE(page.rulesEditor()->errorLine(), 0);
        QVERIFY(page.errorText().isEmpty());
    }

    void saveAndLoadTheRulesFile()
    {
        MappingPage page;
        QAbstractItemModelTester tester(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        page.setCheckpoint(scanFixture(kLegacy));
        const QString rules = QStringLiteral("{ \"rules\": [ { \"id\": \"o_proj\", \"remove\": true } ] }\n");
        page.rulesEditor()->setPlainText(rules);
        const QString path = QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/rules.json");
        QCOMPARE(page.saveRulesFile(path), QString());
        QCOMPARE(QString::fromStdString(tessera::test::readFile(path.toStdString())), rules);
        QTRY_VERIFY(!page.job()->isBusy());
        QCOMPARE(page.job()->settings().rulesName, path);
        const int unmapped = countStatus(*page.model(), MappingStatus::Unmapped);
        QVERIFY(unmapped > 0);
        // The saved file is what --param_mapping takes: the core maps it to the same table.
        tessera::MappingOptions options;
        options.userRulesFile = path.toStdString();
        auto direct = tessera::mapMegatronToHf(*page.job()->checkpoint(), options);
        QVERIFY_RESULT(direct);
        QCOMPARE(int(direct->count(MappingStatus::Unmapped)), unmapped);
        QCOMPARE(int(direct->rows.size()), page.model()->rowCount());
        QCOMPARE(QString::fromStdString(page.model()->row(0)->ruleOrigin).isEmpty(), false);

        MappingPage other;
        other.setCheckpoint(page.job()->checkpoint());
        QCOMPARE(other.loadRulesFile(path), QString());
        QCOMPARE(other.rulesEditor()->toPlainText(), rules);
        QTRY_VERIFY(!other.job()->isBusy());
        QCOMPARE(countStatus(*other.model(), MappingStatus::Unmapped), unmapped);
        QVERIFY(!other.loadRulesFile(path + QStringLiteral(".nope")).isEmpty());
    }

    void copyTakesTheNameOfTheCellItIsPressedOn()
    {
        MappingPage page;
        page.setCheckpoint(scanFixture(kLegacy));
        QTRY_VERIFY(!page.job()->isBusy());
        auto* view = page.findChild<QTableView*>();
        QAction* copy = nullptr;
        for (QAction* action : view->actions())
            if (action->shortcut() == QKeySequence(QKeySequence::Copy))
                copy = action;
        QVERIFY(copy);
        int row = -1;
        for (int r = 0; r < page.proxy()->rowCount() && row < 0; ++r)
            if (page.proxy()->index(r, MappingModel::TargetColumn).data().toString().startsWith(QStringLiteral("model.layers.")))
                row = r;
        QVERIFY(row >= 0);
        const QString megatron = page.proxy()->index(row, MappingModel::SourceColumn).data().toString();
        const QString hf = page.proxy()->index(row, MappingModel::TargetColumn).data().toString();
        QVERIFY(megatron != hf);
        // A Hugging Face cell gives the Hugging Face name; a Megatron cell, the Megatron name.
        view->setCurrentIndex(page.proxy()->index(row, MappingModel::TargetColumn));
        copy->trigger();
        QCOMPARE(QGuiApplication::clipboard()->text(), hf);
        view->setCurrentIndex(page.proxy()->index(row, MappingModel::SourceColumn));
        copy->trigger();
        QCOMPARE(QGuiApplication::clipboard()->text(), megatron);
        // Another column copies the row's Megatron name.
        view->setCurrentIndex(page.proxy()->index(row, MappingModel::RuleColumn));
        copy->trigger();
        QCOMPARE(QGuiApplication::clipboard()->text(), megatron);
    }

    void anotherCheckpointStartsWithoutTheFilterAndAtTheTop()
    {
        MappingPage page;
        page.resize(900, 420);
        page.show();
        page.setCheckpoint(scanFixture(kLegacy));
        QTRY_VERIFY(!page.job()->isBusy());
        page.filterBar()->setText(QStringLiteral("layers"));
        page.filterBar()->flush();
        page.statusCombo()->setCurrentIndex(page.statusCombo()->findData(int(MappingStatus::Ok)));
        auto* view = page.findChild<QTableView*>();
        QTRY_VERIFY(view->verticalScrollBar()->maximum() > 0);
        view->verticalScrollBar()->setValue(view->verticalScrollBar()->maximum());

        page.setCheckpoint(scanFixture(kDist));
        QTRY_VERIFY(!page.job()->isBusy());
        QCOMPARE(page.filterBar()->lineEdit()->text(), QString());
        QCOMPARE(page.statusCombo()->currentData().toInt(), int(MappingFilterProxy::AllStatuses));
        QCOMPARE(page.proxy()->rowCount(), page.model()->rowCount());
        QTRY_VERIFY(view->verticalScrollBar()->maximum() > 0);
        QCOMPARE(view->verticalScrollBar()->value(), 0);
    }

    void nonMegatronLayoutsHideTheEditor()
    {
        MappingPage page;
        QAbstractItemModelTester tester(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        page.show();
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        QTRY_VERIFY(!page.job()->isBusy());
        QVERIFY(page.model()->rowCount() > 0);
        QVERIFY(!page.rulesEditor()->isVisibleTo(&page));
        QCOMPARE(countStatus(*page.model(), MappingStatus::Ok) + countStatus(*page.model(), MappingStatus::Tied),
                 page.model()->rowCount());
    }
};

QTEST_MAIN(TestMappingPage)
#include "tst_mappingpage.moc"
