// SPDX-License-Identifier: GPL-3.0-or-later
// The Training view: the facts `tessera inspect` prints of a verl run's training state, its problems in red, and
// the per-parameter norms of the optimizer's moments in a sortable table, read on a worker with Cancel.

#include "compare/training_norms.h"
#include "jobs/trainingjob.h"
#include "mappingfixtures.h"
#include "models/roles.h"
#include "models/trainingnormsmodel.h"
#include "pages/trainingpage.h"
#include "testutil.h"

#include <QAbstractItemModelTester>
#include <QPushButton>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>

#include <filesystem>

using namespace tessera::ui;
namespace fs = std::filesystem;

namespace {
const char* const kActor = "resume_llama_w2_k2/run/global_step_2/actor";

TrainingNormsPtr sampleNorms()
{
    auto norms = std::make_shared<tessera::TrainingNorms>();
    norms->parameters.push_back({ 0, "model.embed_tokens.weight", { 130, 64 }, 2.0, 0.5, 0.1, "" });
    norms->parameters.push_back({ 1, "model.layers.0.mlp.up_proj.weight", { 175, 64 }, 2.0, 2.5, 0.3, "" });
    norms->parameters.push_back({ 2, "model.norm.weight", { 64 }, std::nullopt, std::nullopt, std::nullopt,
                                  "exp_avg: incomplete" });
    norms->parameters.push_back({ 3, "lm_head.weight", { 130, 64 }, 2.0, 0.01, 0.002, "" });
    return norms;
}

QStringList column(const QAbstractItemModel& model, int col)
{
    QStringList out;
    for (int r = 0; r < model.rowCount(); ++r)
        out << model.index(r, col).data().toString();
    return out;
}
} // namespace

class TestTrainingPage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void modelPassesTheTesterAndSorts()
    {
        TrainingNormsModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSortFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        proxy.setSortRole(SortRole);
        QAbstractItemModelTester proxyTester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        model.setNorms(sampleNorms());
        QCOMPARE(model.rowCount(), 4);
        QCOMPARE(model.columnCount(), int(TrainingNormsModel::ColumnCount));
        QCOMPARE(model.index(0, TrainingNormsModel::ShapeColumn).data().toString(), QStringLiteral("[130, 64]"));
        QCOMPARE(model.index(0, TrainingNormsModel::StepColumn).data().toString(), QStringLiteral("2"));
        QCOMPARE(model.index(1, TrainingNormsModel::ExpAvgColumn).data().toString(), QStringLiteral("2.5"));
        QCOMPARE(model.index(2, TrainingNormsModel::ExpAvgColumn).data().toString(), QStringLiteral("—"));
        QVERIFY(model.index(2, TrainingNormsModel::NoteColumn).data(Qt::ForegroundRole).isValid());
        QVERIFY(!model.index(1, TrainingNormsModel::NoteColumn).data(Qt::ForegroundRole).isValid());
        QCOMPARE(model.index(2, 0).data(ProblemRole).toString(), QStringLiteral("exp_avg: incomplete"));
        // Sorted by the raw norm (not its text), a missing norm last when descending.
        proxy.sort(TrainingNormsModel::ExpAvgColumn, Qt::DescendingOrder);
        QCOMPARE(column(proxy, TrainingNormsModel::ParameterColumn),
                 QStringList({ QStringLiteral("model.layers.0.mlp.up_proj.weight"), QStringLiteral("model.embed_tokens.weight"),
                               QStringLiteral("lm_head.weight"), QStringLiteral("model.norm.weight") }));
        proxy.sort(TrainingNormsModel::ShapeColumn, Qt::AscendingOrder);
        QCOMPARE(proxy.index(0, TrainingNormsModel::ParameterColumn).data().toString(), QStringLiteral("model.norm.weight"));
        proxy.sort(TrainingNormsModel::IndexColumn, Qt::DescendingOrder);
        QCOMPARE(proxy.index(0, TrainingNormsModel::IndexColumn).data().toString(), QStringLiteral("3"));
        for (int c = 0; c < TrainingNormsModel::ColumnCount; ++c)
            QVERIFY(!model.headerData(c, Qt::Horizontal).toString().isEmpty());
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }

    /// The real run: the facts, then the norms read at once (a small optimizer), largest ‖exp_avg‖ on top.
    void showsTheRunsTrainingState()
    {
        TrainingPage page;
        page.resize(1000, 700);
        page.show();
        QSignalSpy norms(&page, &TrainingPage::normsShown);
        page.setCheckpoint(tessera::test::scanFixture(kActor));
        QVERIFY(page.isBusy());
        QTRY_COMPARE_WITH_TIMEOUT(norms.count(), 1, 60000);
        QVERIFY(!page.isBusy());
        const QString html = page.html();
        for (const char* text : { "Adam/AdamW (exp_avg, exp_avg_sq, step)", "lr 0.0095, betas (0.9, 0.999)",
                                  "Adam step", "last_epoch 2, lr 0.0095", "data.pt", "yes: the optimizer and extra state" })
            QVERIFY2(html.contains(QString::fromUtf8(text)), text);
        QCOMPARE(page.model()->rowCount(), 39);
        auto* view = page.tableView();
        QCOMPARE(view->model()->index(0, TrainingNormsModel::ParameterColumn).data().toString(),
                 QStringLiteral("model.embed_tokens.weight"));
        QVERIFY(page.computeButton()->isEnabled());
        // Computing again gives the same table.
        QTest::mouseClick(page.computeButton(), Qt::LeftButton);
        QVERIFY(page.isBusy());
        QTRY_COMPARE_WITH_TIMEOUT(norms.count(), 2, 60000);
        QCOMPARE(page.model()->rowCount(), 39);
        QVERIFY(!page.grab().isNull());
    }

    /// A rank's optimizer file missing: the completeness in red with every problem, and the norms it leaves
    /// unknown say why.
    void problemsAreRed()
    {
        const std::string dir = tessera::test::copyFixtureFolder("resume_llama_w2_k2/run/global_step_2");
        fs::remove(dir + "/actor/optim_world_size_2_rank_1.pt");
        TrainingPage page;
        QSignalSpy norms(&page, &TrainingPage::normsShown);
        page.setCheckpoint(tessera::test::scanPath(dir + "/actor"));
        QTRY_COMPARE_WITH_TIMEOUT(norms.count(), 1, 60000);
        const QString html = page.html();
        QVERIFY2(html.contains(QStringLiteral("a resume would not load this state as it is")), qPrintable(html));
        QVERIFY(html.contains(QStringLiteral("optim_world_size_2_rank_1.pt: rank 1 of 2 is missing")));
        QVERIFY(html.contains(QStringLiteral("no: ")));
        int unread = 0;
        for (int r = 0; r < page.model()->rowCount(); ++r)
            unread += page.model()->index(r, 0).data(ProblemRole).toString().contains(QStringLiteral("incomplete"));
        QVERIFY(unread > 0);
    }

    void aModelWithoutTrainingStateSaysSo()
    {
        TrainingPage page;
        QSignalSpy shown(&page, &TrainingPage::stateShown);
        page.setCheckpoint(tessera::test::scanFixture("fsdp2_qwen2_w2_fp32/global_step_10/actor"));
        QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 60000);
        QVERIFY(!page.state());
        QVERIFY(page.html().contains(QStringLiteral("checkpoint.load_contents=[model]")));
        QVERIFY(!page.computeButton()->isEnabled());
        QVERIFY(!page.computeNorms());
        QCOMPARE(page.model()->rowCount(), 0);
        page.setCheckpoint(tessera::test::scanFixture(tessera::test::kLegacy));
        QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 2, 60000);
        QVERIFY(page.html().contains(QStringLiteral("verl FSDP actor folders")));
    }

    void cancelStopsTheNorms()
    {
        TrainingPage page;
        QSignalSpy norms(&page, &TrainingPage::normsShown);
        page.setCheckpoint(tessera::test::scanFixture(kActor));
        // The automatic read of this small fixture may finish at any time: wait for it, then start one and cancel
        // it in the same turn of the event loop, before its result could be delivered.
        QTRY_COMPARE_WITH_TIMEOUT(norms.count(), 1, 60000);
        QVERIFY(page.computeNorms());
        QVERIFY(page.isBusy());
        QSignalSpy canceled(page.job(), &TrainingJob::canceled);
        page.cancel();
        QCOMPARE(canceled.count(), 1);
        QVERIFY(!page.isBusy());
        QTest::qWait(300);
        QCOMPARE(norms.count(), 1);
        QCOMPARE(page.model()->rowCount(), 0);
        QVERIFY(page.computeButton()->isEnabled());
    }

    /// The job's own progress arrives on the GUI thread, and a new checkpoint supersedes a running read.
    void jobReportsProgressAndIsSuperseded()
    {
        TrainingJob job;
        QSignalSpy state(&job, &TrainingJob::stateRead);
        job.readState(tessera::test::scanFixture(kActor));
        QTRY_COMPARE_WITH_TIMEOUT(state.count(), 1, 60000);
        const auto read = state.first().first().value<TrainingStatePtr>();
        QVERIFY(read && read->hasOptimizer());
        QSignalSpy progress(&job, &TrainingJob::progress);
        QSignalSpy norms(&job, &TrainingJob::normsComputed);
        job.computeNorms(read);
        QTRY_COMPARE_WITH_TIMEOUT(norms.count(), 1, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(!progress.isEmpty(), 5000);
        QCOMPARE(progress.last().at(0).toULongLong(), progress.last().at(1).toULongLong()); // the last report is the end
        job.computeNorms(read);
        job.readState(tessera::test::scanFixture("fsdp2_qwen2_w2_fp32/global_step_10/actor"));
        QTRY_COMPARE_WITH_TIMEOUT(state.count(), 2, 60000);
        QTest::qWait(200);
        QCOMPARE(norms.count(), 1); // the superseded run never delivers
    }
};

QTEST_MAIN(TestTrainingPage)
#include "tst_trainingpage.moc"
