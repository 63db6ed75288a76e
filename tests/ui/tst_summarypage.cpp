// SPDX-License-Identifier: GPL-3.0-or-later
// The Summary says what a merge would refuse, from the Merge page's own plan, so that it never disagrees with it.

#include "formats/scan.h"
#include "jobs/scanjob.h"
#include "mappingfixtures.h"
#include "pages/mergepage.h"
#include "pages/summarypage.h"
#include "testutil.h"

#include <QSignalSpy>
#include <QTest>

#include <filesystem>

using namespace tessera::ui;
namespace fs = std::filesystem;

namespace {
/// The Summary as the workbench has it: saying what the Merge page's plan of the same checkpoint found.
struct Followed {
    explicit Followed(const CheckpointPtr& checkpoint)
    {
        summary.followMergePlan(&merge);
        summary.setCheckpoint(checkpoint);
        merge.setCheckpoint(checkpoint);
    }
    MergePage merge;
    SummaryPage summary;
};
} // namespace

class TestSummaryPage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void mergeableCheckpointHasNoRefusal()
    {
        Followed page(tessera::test::scanFixture("lora_llama_w2_fp32/global_step_10/actor"));
        QTRY_VERIFY_WITH_TIMEOUT(!page.summary.isCheckingMerge(), 60000); // prepareMerge() runs on a worker
        QVERIFY(!page.summary.html().contains(QStringLiteral("A merge would refuse it")));
        QVERIFY(page.summary.html().contains(QStringLiteral("LoRA")));
    }

    void refusalIsListed()
    {
        // The LoRA fixture without lora_train_meta.json: alpha is unknown, and the merge stops.
        const std::string dir = tessera::test::copyFixtureFolder("lora_llama_w2_fp32");
        fs::remove(dir + "/global_step_10/actor/lora_train_meta.json");
        Followed page(tessera::test::scanPath(dir + "/global_step_10/actor"));
        QTRY_VERIFY_WITH_TIMEOUT(!page.summary.isCheckingMerge(), 60000); // prepareMerge() runs on a worker
        QVERIFY2(page.summary.html().contains(QStringLiteral("A merge would refuse it")), qPrintable(page.summary.html()));
        QVERIFY(page.summary.html().contains(QStringLiteral("--lora_alpha")));
    }

    void parallelSizesReadAlikeInEveryLayout()
    {
        // The same TP 2 × PP 2 model in the per-rank and the torch_dist layout: one line, no unknown "DP 0", no
        // "VPP 1" that the other layout would call 0.
        for (const char* fixture : { tessera::test::kLegacy, tessera::test::kDist }) {
            SummaryPage page;
            page.setCheckpoint(tessera::test::scanFixture(fixture));
            const QString html = page.html();
            QVERIFY2(html.contains(QStringLiteral("TP 2 · PP 2")), qPrintable(html));
            QVERIFY2(!html.contains(QStringLiteral("DP 0")) && !html.contains(QStringLiteral("VPP")), qPrintable(html));
        }
    }

    void incompleteCheckpointListsEveryTensorOnce()
    {
        // A rank cut short: the file and each tensor it leaves with holes, counted alike, the folder named once.
        const std::string dir = tessera::test::copyFixtureFolder("fsdp2_llama_w4");
        const std::string rank2 = dir + "/global_step_10/actor/model_world_size_4_rank_2.pt";
        fs::resize_file(rank2, fs::file_size(rank2) / 2);
        const auto info = tessera::test::scanPath(dir + "/global_step_10/actor");
        SummaryPage page;
        page.setCheckpoint(info);
        const QString html = page.html();
        QVERIFY2(html.contains(QStringLiteral("%1 problems").arg(info->tensors.size() + 1)), qPrintable(html));
        QCOMPARE(html.count(QStringLiteral("incomplete: ")), int(info->tensors.size()));
        // The heading names the folder; problems name what is below it.
        QCOMPARE(html.count(QString::fromStdString(info->root) + QStringLiteral(": ")), 0);
        QCOMPARE(html.count(QString::fromStdString(info->root) + QStringLiteral("/model_world_size")), 0);
        QVERIFY(html.contains(QStringLiteral(">model_world_size_4_rank_2.pt: no ZIP")));
    }

    void missingParametersAreProblems()
    {
        // config.json describes a fifth layer the checkpoint does not hold: the workbench's scan checks the
        // parameters as inspect and merge do, and the summary lists each missing one.
        const std::string dir = tessera::test::copyFixtureFolder("fsdp2_llama_w4");
        const std::string config = dir + "/global_step_10/actor/huggingface/config.json";
        std::string text = tessera::test::readFile(config);
        const std::string layers = "\"num_hidden_layers\": 4";
        QVERIFY(text.find(layers) != std::string::npos);
        text.replace(text.find(layers), layers.size(), "\"num_hidden_layers\": 5");
        tessera::test::writeFile(config, text);
        ScanJob job;
        QSignalSpy finished(&job, &ScanJob::finished);
        job.start(QString::fromStdString(dir + "/global_step_10/actor"));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        const auto checkpoint = finished.first().first().value<CheckpointPtr>();
        QCOMPARE(checkpoint->problems.size(), std::size_t(9)); // q, k, v, o, gate, up, down and two norms
        SummaryPage page;
        page.setCheckpoint(checkpoint);
        const QString html = page.html();
        QVERIFY2(html.contains(QStringLiteral("9 problems"))
                     && html.contains(QStringLiteral("model.layers.4.mlp.down_proj.weight: missing: ")),
                 qPrintable(html));
    }
};

QTEST_MAIN(TestSummaryPage)
#include "tst_summarypage.moc"
