// SPDX-License-Identifier: GPL-3.0-or-later
// One path from request to plan: for every shared fixture with a reference, the Merge, Split, Diff and Test the
// workbench's pages prepare (the checkpoint loaded as the workbench loads it, the request built from the pages'
// widgets) are the ones the command line prepares from its argv; and a page refuses what the command line
// refuses, in the same words.

#include "jobs/scanjob.h"
#include "pages/diffpage.h"
#include "pages/mergepage.h"
#include "pages/splitpage.h"
#include "testutil.h"

#include "compare/diff_export.h"
#include "merge/gguf_plan.h"
#include "merge/merge_plan.h"
#include "ops/flag_table.h"
#include "ops/prepare_diff.h"
#include "ops/prepare_merge.h"
#include "ops/prepare_split.h"
#include "ops/prepare_test.h"
#include "ops/vocabulary.h"
#include "split/split_plan.h"

#include <QComboBox>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTest>

#include <nlohmann/json.hpp>

#include <filesystem>

using namespace tessera::ui;
namespace fs = std::filesystem;

/// The page plans on a worker: waits for the plan of the options just set.
#define SETTLED(page) QTRY_VERIFY_WITH_TIMEOUT(!(page).isPlanning(), 60000)

namespace {

/// The fixtures that have a reference: their actor folder (and DCP folder, with the actor's config) each.
const std::vector<std::string>& fixturesWithReference()
{
    static const std::vector<std::string> names { "fsdp2_llama_w4", "fsdp2_qwen2_w2_fp32", "fsdp1_llama_w2_dtensor",
                                                  "hsdp_qwen2_2x2", "lora_llama_w2_fp32", "megatron_legacy_qwen2_tp2_pp2",
                                                  "megatron_dist_llama_tp2_pp2", "megatron_dist_deepseekv3_tp2_pp1",
                                                  "megatron_legacy_qwen25vl_tp2_pp1", "gguf_llama_w2_fp32",
                                                  "gguf_llama256_w2_bf16" };
    return names;
}

/// The checkpoint at `path` as the workbench opens it (File ▸ Open: a ScanJob, with --hf_model_path when given).
CheckpointPtr openAsTheWorkbench(const QString& path, const QString& hfModelPath)
{
    ScanJob job;
    QSignalSpy finished(&job, &ScanJob::finished);
    QSignalSpy failed(&job, &ScanJob::failed);
    job.start(path, hfModelPath);
    if (!QTest::qWaitFor([&] { return finished.count() + failed.count() > 0; }, 60000) || finished.isEmpty())
        qFatal("cannot open %s", qPrintable(path));
    return finished.first().first().value<CheckpointPtr>();
}

QStringList argList(const std::vector<std::string>& args)
{
    QStringList list;
    for (const auto& a : args)
        list << QString::fromStdString(a);
    return list;
}

std::string refusalText(const std::optional<tessera::Refusal>& refusal)
{
    return refusal ? refusal->error.message : std::string();
}

std::string statusText(const tessera::Status& status) { return status ? std::string() : status.error().message; }

std::vector<std::string> messagesOf(const tessera::PreparedModel& model)
{
    std::vector<std::string> lines;
    for (const auto& m : model.messages)
        lines.push_back((m.kind == tessera::PrepareMessage::Kind::Warning ? "warning: " : "note: ") + m.text);
    return lines;
}

/// Two prepared merges write the same: the same outputs planned tensor for tensor, the same messages and refusals.
void compareMerges(const tessera::PreparedMerge& page, const tessera::PreparedMerge& cli)
{
    QCOMPARE(refusalText(page.refusal), refusalText(cli.refusal));
    QCOMPARE(messagesOf(page.model), messagesOf(cli.model));
    QCOMPARE(statusText(page.target), statusText(cli.target));
    QCOMPARE(statusText(page.adapterTarget), statusText(cli.adapterTarget));
    QCOMPARE(bool(page.gguf), bool(cli.gguf));
    if (page.gguf)
        QCOMPARE(tessera::ggufPlanToJson(*page.gguf).dump(), tessera::ggufPlanToJson(*cli.gguf).dump());
    const auto a = page.outputs();
    const auto b = cli.outputs();
    QCOMPARE(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        QCOMPARE(a[i].subfolder, b[i].subfolder);
        QCOMPARE(tessera::mergePlanToJson(*a[i].plan, *a[i].info).dump(),
                 tessera::mergePlanToJson(*b[i].plan, *b[i].info).dump());
    }
}

/// The page's command line, read back by the command line's parser, is the page's request.
template <typename Request>
void checkShownCommandLine(const Request& request)
{
    auto back = Request::fromArgs(request.toArgs());
    QVERIFY2(back, back ? "" : back.error().message.c_str());
    QVERIFY(*back == request);
}

QLineEdit* lineEditWithPlaceholder(const QWidget& page, const QString& text)
{
    for (auto* edit : page.findChildren<QLineEdit*>())
        if (edit->placeholderText().startsWith(text))
            return edit;
    return nullptr;
}

} // namespace

class TestPageCliParity : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void pagesPrepareWhatTheCommandLinePrepares_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QString>("hfModelPath");
        QTest::addColumn<QString>("reference");
        // Paths as a file dialog gives them (no "..": the workbench shows its folders that way too).
        auto folder = [](const std::string& relative) {
            return QString::fromStdString(fs::weakly_canonical(tessera::test::fixture(relative)).string());
        };
        for (const auto& name : fixturesWithReference()) {
            const QString actor = folder(name + "/global_step_10/actor");
            const QString reference = folder(name + "/reference");
            QTest::newRow(name.c_str()) << actor << QString() << reference;
            if (fs::exists(tessera::test::fixture(name + "/dcp")))
                QTest::newRow((name + "/dcp").c_str())
                    << folder(name + "/dcp") << folder(name + "/global_step_10/actor/huggingface") << reference;
        }
    }

    void pagesPrepareWhatTheCommandLinePrepares()
    {
        QFETCH(QString, path);
        QFETCH(QString, hfModelPath);
        QFETCH(QString, reference);
        const CheckpointPtr checkpoint = openAsTheWorkbench(path, hfModelPath);
        // What a user types: the checkpoint (with its config folder when it is not next to it) and the target.
        std::vector<std::string> model { "--local_dir", path.toStdString() };
        if (!hfModelPath.isEmpty())
            model.insert(model.end(), { "--hf_model_path", hfModelPath.toStdString() });
        const std::string parent = tessera::test::makeTempDir();

        // Merge.
        MergePage merge;
        SplitPage split;
        QObject::connect(&merge, &MergePage::modelRequestChanged, &split,
                         [&] { split.setSource(merge.modelRequest(), merge.prepareContext(), checkpoint); });
        merge.setCheckpoint(checkpoint);
        merge.setTargetDir(QString::fromStdString(parent + "/merged"));
        SETTLED(merge);
        QVERIFY(merge.prepared());
        QVERIFY2(merge.canRun(), qPrintable(merge.planText()));
        std::vector<std::string> mergeArgs = model;
        mergeArgs.insert(mergeArgs.end(), { "--target_dir", parent + "/merged" });
        const auto mergeRequest = tessera::MergeRequest::fromArgs(mergeArgs);
        QVERIFY_RESULT(mergeRequest);
        compareMerges(*merge.prepared(), tessera::prepareMerge(*mergeRequest));
        if (QTest::currentTestFailed())
            return;
        checkShownCommandLine(merge.request());
        // The line shown, run by itself as the command line runs it, plans the same merge.
        compareMerges(*merge.prepared(), tessera::prepareMerge(*tessera::MergeRequest::fromArgs(merge.request().toArgs())));
        if (QTest::currentTestFailed())
            return;

        // Split (the Merge page's model, as FSDP2 rank files of world size 2: the page's default).
        split.setTargetDir(QString::fromStdString(parent + "/split"));
        SETTLED(split);
        QVERIFY(split.prepared());
        std::vector<std::string> splitArgs = model;
        if (tessera::isHuggingFaceLayout(checkpoint->layout))
            splitArgs[0] = "--hf_dir";
        splitArgs.insert(splitArgs.end(), { "--target_dir", parent + "/split", "--format", "fsdp", "--world_size", "2" });
        const auto splitRequest = tessera::SplitRequest::fromArgs(splitArgs);
        QVERIFY_RESULT(splitRequest);
        const tessera::PreparedSplit cliSplit = tessera::prepareSplit(*splitRequest);
        const tessera::PreparedSplit& pageSplit = *split.prepared();
        QCOMPARE(refusalText(pageSplit.refusal), refusalText(cliSplit.refusal));
        QCOMPARE(messagesOf(pageSplit.model), messagesOf(cliSplit.model));
        QCOMPARE(statusText(pageSplit.target), statusText(cliSplit.target));
        QCOMPARE(bool(pageSplit.plan), bool(cliSplit.plan));
        if (pageSplit.plan)
            QCOMPARE(tessera::splitPlanToJson(*pageSplit.plan, pageSplit.model.primary()).dump(),
                     tessera::splitPlanToJson(*cliSplit.plan, cliSplit.model.primary()).dump());
        checkShownCommandLine(split.request());

        // Test against reference: the request the page hands its CompareJob, prepared as the job prepares it.
        merge.setReferenceDir(reference);
        std::vector<std::string> testArgs = model;
        testArgs.insert(testArgs.end(), { "--test_hf_dir", reference.toStdString() });
        const auto testRequest = tessera::TestRequest::fromArgs(testArgs);
        QVERIFY_RESULT(testRequest);
        const tessera::PreparedTest cliTest = tessera::prepareTest(*testRequest);
        const tessera::PreparedTest pageTest = tessera::prepareTest(merge.testRequest(), merge.prepareContext());
        QCOMPARE(refusalText(pageTest.refusal), refusalText(cliTest.refusal));
        QCOMPARE(messagesOf(pageTest.model), messagesOf(cliTest.model));
        QCOMPARE(pageTest.compare.ignore, cliTest.compare.ignore);
        QCOMPARE(tessera::mergePlanToJson(pageTest.model.primary(), pageTest.model.primaryInfo()).dump(),
                 tessera::mergePlanToJson(cliTest.model.primary(), cliTest.model.primaryInfo()).dump());
        checkShownCommandLine(merge.testRequest());

        // Diff: the page's comparison, row for row, with the warnings the command line prints.
        DiffPage diff;
        diff.setCheckpoint(checkpoint);
        diff.setReferenceDir(reference);
        QSignalSpy compared(&diff, &DiffPage::comparisonFinished);
        QVERIFY(diff.compare());
        QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 120000);
        std::vector<std::string> diffArgs { path.toStdString(), reference.toStdString() };
        if (!hfModelPath.isEmpty())
            diffArgs.insert(diffArgs.end(), { "--hf_model_path", hfModelPath.toStdString() });
        const auto diffRequest = tessera::DiffRequest::fromArgs(diffArgs);
        QVERIFY_RESULT(diffRequest);
        const tessera::PreparedDiff cliDiff = tessera::prepareDiff(*diffRequest);
        QCOMPARE(refusalText(cliDiff.refusal), std::string());
        QCOMPARE(diff.warnings(), cliDiff.warnings);
        QCOMPARE(diff.modelsText(), QString::fromStdString(cliDiff.models));
        const auto cliReport = tessera::runPreparedDiff(cliDiff);
        QVERIFY_RESULT(cliReport);
        QVERIFY(diff.report());
        QCOMPARE(tessera::diffReportToJson(*diff.report(), {}, {}, {}).dump(),
                 tessera::diffReportToJson(*cliReport, {}, {}, {}).dump());
        checkShownCommandLine(diff.request());
    }

    void gguf_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("outtype");
        QTest::newRow("f32") << QStringLiteral("gguf_llama_w2_fp32") << QStringLiteral("f32");
        QTest::newRow("q8_0") << QStringLiteral("gguf_llama256_w2_bf16") << QStringLiteral("q8_0");
    }

    void gguf()
    {
        QFETCH(QString, fixture);
        QFETCH(QString, outtype);
        const std::string path = tessera::test::fixture(fixture.toStdString() + "/global_step_10/actor");
        MergePage page;
        page.setCheckpoint(openAsTheWorkbench(QString::fromStdString(path), {}));
        for (auto* box : page.findChildren<QComboBox*>()) {
            if (box->findData(QStringLiteral("gguf")) >= 0)
                box->setCurrentIndex(box->findData(QStringLiteral("gguf")));
        }
        for (auto* box : page.findChildren<QComboBox*>()) {
            if (box->findData(QStringLiteral("q8_0")) >= 0)
                box->setCurrentIndex(box->findData(outtype));
        }
        const std::string target = tessera::test::makeTempDir() + "/gguf";
        page.setTargetDir(QString::fromStdString(target));
        SETTLED(page);
        QVERIFY(page.prepared() && page.prepared()->gguf);
        const auto cli = tessera::MergeRequest::fromArgs(
            { "--local_dir", path, "--target_dir", target, "--format", "gguf", "--outtype", outtype.toStdString() });
        QVERIFY_RESULT(cli);
        compareMerges(*page.prepared(), tessera::prepareMerge(*cli));
        checkShownCommandLine(page.request());
    }

    void pageRefusesWhatTheCommandLineRefuses_data()
    {
        QTest::addColumn<QString>("placeholder");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("flag");
        QTest::addColumn<int>("exitCode");
        QTest::newRow("--lora_alpha above 1e9") << QStringLiteral("from lora_train_meta.json") << QStringLiteral("2e9")
                                                << QStringLiteral("--lora_alpha") << 2;
        QTest::newRow("a Megatron --base_model")
            << QStringLiteral("only for adapter-only") << QString::fromStdString(tessera::test::fixture("megatron_legacy_qwen2_tp2_pp2/global_step_10/actor"))
            << QStringLiteral("--base_model") << 1;
    }

    void pageRefusesWhatTheCommandLineRefuses()
    {
        QFETCH(QString, placeholder);
        QFETCH(QString, value);
        QFETCH(QString, flag);
        QFETCH(int, exitCode);
        const std::string path = tessera::test::fixture("lora_llama_w2_fp32/global_step_10/actor");
        const std::string target = tessera::test::makeTempDir() + "/merged";
        MergePage page;
        page.setCheckpoint(openAsTheWorkbench(QString::fromStdString(path), {}));
        page.setTargetDir(QString::fromStdString(target));
        SETTLED(page);
        QVERIFY(page.canRun());
        QLineEdit* edit = lineEditWithPlaceholder(page, placeholder);
        QVERIFY(edit && edit->isEnabled());
        edit->setText(value);
        SETTLED(page);
        QVERIFY(!page.canRun());
        const auto& refusal = page.prepared()->refusal;
        QVERIFY(refusal);
        const QString words = QString::fromStdString(refusal->error.message);
        QVERIFY2(words.contains(flag), qPrintable(words));
        QVERIFY2(page.planText().contains(words), qPrintable(page.planText()));
        // The command line the page shows is refused by the command line, in the same words.
        QVERIFY2(page.commandLine().contains(flag + QLatin1Char(' ') + value), qPrintable(page.commandLine()));
        QString out, err;
        QCOMPARE(tessera::test::runTessera(QStringList { QStringLiteral("merge") } << argList(page.request().toArgs()), &out, &err),
                 exitCode);
        QVERIFY2(err.contains(words), qPrintable(err));
        // So is the same flag given to a user's shorter command line.
        QCOMPARE(tessera::test::runTessera(tessera::test::A({ "merge", "--local_dir", path, "--target_dir", target,
                                                              flag, value, "--dry-run" }),
                                           &out, &err),
                 exitCode);
        QVERIFY2(err.contains(words), qPrintable(err));
        // Test against reference refuses it too, before comparing anything.
        page.setReferenceDir(QString::fromStdString(tessera::test::fixture("lora_llama_w2_fp32/reference")));
        const tessera::PreparedTest test = tessera::prepareTest(page.testRequest(), page.prepareContext());
        QVERIFY(test.refusal);
        QCOMPARE(QString::fromStdString(test.refusal->error.message), words);
    }
};

QTEST_MAIN(TestPageCliParity)
#include "tst_page_cli_parity.moc"
