// SPDX-License-Identifier: GPL-3.0-or-later
// The Split page: plans from the model the Merge page plans, shows the files and the planned placement before
// anything is written, and writes on a worker with progress; the result merges back to the same model.

#include "jobs/splitjob.h"
#include "mappingfixtures.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "models/splitplanmodel.h"
#include "pages/mergepage.h"
#include "pages/splitpage.h"
#include "ops/prepare_split.h"
#include "split/split_plan.h"
#include "split/split_training.h"
#include "testutil.h"
#include "widgets/placementview.h"

#include <QAbstractItemModelTester>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTest>

#include <filesystem>

using namespace tessera::ui;
using tessera::test::scanFixture;

namespace {

/// The model a merge of `checkpoint` writes, as the Merge page would hand it over.
std::shared_ptr<const tessera::MergePlan> modelOf(const CheckpointPtr& checkpoint)
{
    auto plan = tessera::planMerge(*checkpoint, {});
    if (!plan)
        qFatal("%s", plan.error().message.c_str());
    return std::make_shared<const tessera::MergePlan>(std::move(plan).value());
}

} // namespace

/// The page plans on a worker: waits for the plan of the options just set.
#define SETTLED(page) QTRY_VERIFY_WITH_TIMEOUT(!(page).isPlanning(), 60000)

class TestSplitPage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void plansBeforeWriting()
    {
        SplitPage page;
        QAbstractItemModelTester tester(page.planModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(!page.plan());
        QVERIFY(!page.canRun());
        QVERIFY(page.planText().startsWith(QStringLiteral("Open a checkpoint")));
        const CheckpointPtr hf = scanFixture("fsdp2_llama_w4/reference");
        page.setCheckpoint(hf);
        // While the first plan is on its way the page no longer asks for a checkpoint.
        QCOMPARE(page.planText(), QStringLiteral("Planning…"));
        page.setWorldSize(4);
        SETTLED(page);
        QVERIFY(page.plan());
        QCOMPARE(page.plan()->files.size(), std::size_t(4));
        // Four rank files, fsdp_config.json and the config folder.
        QCOMPARE(page.planModel()->rowCount(), 6);
        QCOMPARE(page.planModel()->index(3, SplitPlanModel::FileColumn).data().toString(),
                 QStringLiteral("model_world_size_4_rank_3.pt"));
        QVERIFY(page.commandLine().contains(QStringLiteral("--hf_dir")));
        QVERIFY(page.commandLine().contains(QStringLiteral("--world_size 4")));
        QVERIFY(!page.canRun()); // no output folder yet

        // The placement drawing shows the planned boxes: the embedding's rows over the 4 ranks.
        page.previewTensor(0);
        QCOMPARE(page.preview()->geometry().pieces.size(), std::size_t(4));

        page.setMesh(QStringLiteral("2x2"));
        SETTLED(page);
        QVERIFY(page.plan());
        QVERIFY(page.planText().contains(QStringLiteral("ddp=2")));
        QCOMPARE(page.preview()->geometry().pieces.size(), std::size_t(2)); // the replicas are drawn on their primaries

        page.setFormat(QStringLiteral("megatron"));
        page.setMegatronSizes(4, 1);
        SETTLED(page);
        QVERIFY(!page.plan()); // 2 KV heads do not split over TP 4
        QVERIFY(page.planText().contains(QStringLiteral("key/value heads")));
        page.setMegatronSizes(2, 2);
        SETTLED(page);
        QVERIFY(page.plan());
        QCOMPARE(page.plan()->files.size(), std::size_t(4));
        QVERIFY(page.commandLine().contains(QStringLiteral("--format megatron --tp 2 --pp 2")));
    }

    void writesOnAWorkerAndMergesBack()
    {
        SplitPage page;
        const CheckpointPtr checkpoint = scanFixture("fsdp2_llama_w4/global_step_10/actor");
        page.setCheckpoint(checkpoint);
        page.setFormat(QStringLiteral("dcp"));
        page.setWorldSize(3);
        const std::string target = tessera::test::makeTempDir() + "/dcp";
        page.setTargetDir(QString::fromStdString(target));
        SETTLED(page);
        QVERIFY(page.canRun());
        QSignalSpy finished(page.job(), &SplitJob::finished);
        page.run();
        QVERIFY(!page.canRun());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        const auto result = finished.first().first().value<SplitResult>();
        QVERIFY2(result.ok, qPrintable(result.message));
        QVERIFY(page.logText().contains(QStringLiteral("Done")));
        QVERIFY(QFileInfo::exists(QString::fromStdString(target + "/.metadata")));

        const CheckpointPtr written = tessera::test::scanPath(target);
        const auto back = modelOf(written);
        const std::string merged = tessera::test::makeTempDir() + "/merged";
        QVERIFY_RESULT(tessera::mergeCheckpoint(*written, *back, merged, {}));
        QCOMPARE(tessera::test::readFile(merged + "/model.safetensors"),
                 tessera::test::readFile(tessera::test::fixture("fsdp2_llama_w4/reference/model.safetensors")));
    }

    void carriesTheTrainingStateUnlessModelOnly()
    {
        SplitPage page;
        page.setCheckpoint(scanFixture("resume_llama_w2_k2/run/global_step_2/actor"));
        page.setWorldSize(3);
        SETTLED(page);
        QVERIFY(page.plan());
        QVERIFY(page.plan()->training);
        QVERIFY2(page.planText().contains(QStringLiteral("optim_world_size_3_rank_R.pt  3 files")), qPrintable(page.planText()));
        QVERIFY(!page.commandLine().contains(QStringLiteral("--model_only")));
        // The file table lists every file the split writes, the training state's too.
        QStringList names;
        for (int row = 0; row < page.planModel()->rowCount(); ++row)
            names << page.planModel()->index(row, SplitPlanModel::FileColumn).data().toString();
        QVERIFY2(names.contains(QStringLiteral("optim_world_size_3_rank_2.pt")), qPrintable(names.join(QLatin1Char(' '))));
        QVERIFY(names.contains(QStringLiteral("extra_state_world_size_3_rank_2.pt")));
        // DCP cannot hold verl's optimizer files: refused, naming the way out.
        page.setFormat(QStringLiteral("dcp"));
        SETTLED(page);
        QVERIFY(!page.plan() || !page.prepared()->runnable());
        QVERIFY2(page.planText().contains(QStringLiteral("--model_only")), qPrintable(page.planText()));
        page.setModelOnly(true);
        SETTLED(page);
        QVERIFY(page.plan());
        QVERIFY(!page.plan()->training);
        QVERIFY(page.commandLine().contains(QStringLiteral("--model_only")));
    }

    void refusedTargetIsReportedAndNothingIsWritten()
    {
        SplitPage page;
        const CheckpointPtr hf = scanFixture("fsdp2_llama_w4/reference");
        page.setCheckpoint(hf);
        // The shared fixture folder holds a checkpoint already: the split refuses it, as `tessera split --dry-run`
        // does, before Split is pressed; Split stays disabled and nothing runs.
        page.setTargetDir(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        SETTLED(page);
        QVERIFY(page.plan());
        QVERIFY(!page.canRun());
        QVERIFY2(page.statusText().contains(QStringLiteral("already holds a checkpoint")), qPrintable(page.statusText()));
        page.run();
        QVERIFY(!page.job()->isRunning());
    }

    void followsTheMergePagesPlan()
    {
        // The workbench hands the Merge page's model over; a Megatron checkpoint arrives mapped.
        MergePage merge;
        SplitPage split;
        const CheckpointPtr checkpoint = scanFixture(tessera::test::kLegacy);
        QObject::connect(&merge, &MergePage::modelRequestChanged, &split, [&] {
            split.setSource(merge.modelRequest(), merge.prepareContext(), checkpoint);
        });
        merge.setCheckpoint(checkpoint);
        QTRY_VERIFY_WITH_TIMEOUT(merge.plannedModel() != nullptr, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(split.plan() != nullptr, 60000);
        QCOMPARE(split.plan()->files.front().tensors.front().spec.name, std::string("model.embed_tokens.weight"));
    }
};

QTEST_MAIN(TestSplitPage)
#include "tst_splitpage.moc"
