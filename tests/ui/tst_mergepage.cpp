// SPDX-License-Identifier: GPL-3.0-or-later
#include "coreconvert.h"
#include "jobs/comparejob.h"
#include "jobs/mappingjob.h"
#include "jobs/mergejob.h"
#include "mappingfixtures.h"
#include "mapping/megatron_mapping.h"
#include "merge/gguf_plan.h"
#include "merge/merge_plan.h"
#include "models/mergeplanmodel.h"
#include "pages/mappingpage.h"
#include "pages/mergepage.h"
#include "formats/scan.h"
#include "testutil.h"
#include "widgets/ruleseditor.h"
#include "confirm.h"

#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>

using namespace tessera::ui;

using tessera::test::kLegacy;
using tessera::test::scanFixture;

namespace {
QCheckBox* checkBox(const MergePage& page, const QString& text)
{
    for (auto* box : page.findChildren<QCheckBox*>())
        if (box->text() == text)
            return box;
    return nullptr;
}

/// The choice among the page's combo boxes that offers `data`.
QComboBox* comboWithData(const MergePage& page, const QString& data)
{
    for (auto* box : page.findChildren<QComboBox*>())
        if (box->findData(data) >= 0)
            return box;
    return nullptr;
}

/// The label of the page whose text contains `part`.
QLabel* labelWith(const MergePage& page, const QString& part)
{
    for (auto* label : page.findChildren<QLabel*>())
        if (label->text().contains(part))
            return label;
    return nullptr;
}

/// A GGUF type's item as the choice shows it: name, size when known, what the type is for.
QString typeItem(const tessera::GgufOutTypeInfo& type, const QString& size)
{
    return size.isEmpty() ? QStringLiteral("%1 — %2").arg(QLatin1String(type.name), QString::fromUtf8(type.summary))
                          : QStringLiteral("%1 — %2 — %3").arg(QLatin1String(type.name), size, QString::fromUtf8(type.summary));
}

/// Each item of the GGUF type choice shows the size ggufFileSizesByType gives for its type from `plan`.
bool showsSizesOf(const QComboBox& outtype, const tessera::GgufPlan& plan)
{
    for (const auto& [id, bytes] : tessera::ggufFileSizesByType(plan)) {
        const auto& type = tessera::ggufOutType(id);
        const QString shown = outtype.itemText(outtype.findData(QLatin1String(type.name)));
        // 0: the type's mixture refuses the model.
        if (shown != typeItem(type, bytes ? bytesText(bytes) : QStringLiteral("cannot be written"))) {
            qWarning("%s", qPrintable(shown));
            return false;
        }
    }
    return true;
}
} // namespace

/// The page plans on a worker: waits for the plan of the options just set.
#define SETTLED(page) QTRY_VERIFY_WITH_TIMEOUT(!(page).isPlanning(), 60000)

class TestMergePage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void plansAndMerges_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::newRow("HSDP") << QStringLiteral("hsdp_qwen2_2x2");
        QTest::newRow("DeepSeek-V3 torch_dist") << QStringLiteral("megatron_dist_deepseekv3_tp2_pp1");
        QTest::newRow("Qwen2.5-VL legacy") << QStringLiteral("megatron_legacy_qwen25vl_tp2_pp1");
    }

    void plansAndMerges()
    {
        QFETCH(QString, fixture);
        const CheckpointPtr checkpoint = scanFixture(fixture.toStdString() + "/global_step_10/actor");
        MergePage page;
        QVERIFY(!page.canRun());
        page.setCheckpoint(checkpoint);
        // Megatron names are mapped on a worker first.
        QTRY_VERIFY(page.planText().contains(QStringLiteral("model.embed_tokens.weight")));
        QVERIFY(!page.canRun()); // no output folder yet
        const QString target = QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/merged");
        page.setTargetDir(target);
        SETTLED(page);
        QVERIFY(page.canRun());
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        const auto result = finished.first().first().value<MergeResult>();
        QVERIFY2(result.ok, qPrintable(result.message));
        QCOMPARE(tessera::test::readFile(target.toStdString() + "/model.safetensors"),
                 tessera::test::readFile(tessera::test::fixture(fixture.toStdString() + "/reference/model.safetensors")));
    }

    void commandLineRunsAsShown_data()
    {
        QTest::addColumn<QString>("checkpoint");
        QTest::addColumn<QString>("backend");
        QTest::newRow("verl FSDP") << QStringLiteral("fsdp2_llama_w4/global_step_10/actor") << QStringLiteral("fsdp");
        QTest::newRow("Megatron") << QString::fromLatin1(kLegacy) << QStringLiteral("megatron");
        QTest::newRow("Hugging Face folder") << QStringLiteral("fsdp2_llama_w4/reference") << QStringLiteral("auto");
    }

    void commandLineRunsAsShown()
    {
        // The command line the page shows is one the CLI accepts: --backend fsdp would refuse a Hugging Face
        // folder, which only auto takes.
        QFETCH(QString, checkpoint);
        QFETCH(QString, backend);
        MergePage page;
        page.setCheckpoint(scanFixture(checkpoint.toStdString()));
        SETTLED(page);
        page.setTargetDir(QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/merged"));
        SETTLED(page);
        const QString shown = page.commandLine();
        QVERIFY2(shown.contains(QStringLiteral("--backend ") + backend + QLatin1Char(' ')), qPrintable(shown));
        QStringList args = shown.split(QLatin1Char(' '), Qt::SkipEmptyParts).mid(1); // the fixtures' paths hold no spaces
        QString out, err;
        QVERIFY2(tessera::test::runTessera(args << QStringLiteral("--dry-run"), &out, &err) == 0, qPrintable(err));
    }

    void badShardSizeIsExplained()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        SETTLED(page);
        for (auto* edit : page.findChildren<QLineEdit*>()) {
            if (edit->text() == QLatin1String("5GB"))
                edit->setText(QStringLiteral("5G"));
        }
        SETTLED(page);
        QVERIFY(page.planText().startsWith(QStringLiteral("--max_shard_size")));
        QVERIFY(!page.canRun());
        QCOMPARE(page.planModel()->rowCount(), 0);
    }

    void planTable()
    {
        MergePage page;
        QAbstractItemModelTester tester(page.planModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        SETTLED(page);
        for (auto* edit : page.findChildren<QLineEdit*>())
            if (edit->text() == QLatin1String("5GB"))
                edit->setText(QStringLiteral("100KB")); // several files and an index
        SETTLED(page);
        const auto* plan = page.planModel()->plan();
        QVERIFY(plan);
        QVERIFY(plan->files.size() > 1);
        auto* model = page.planModel();
        QCOMPARE(model->index(0, MergePlanModel::FileColumn).data().toString(),
                 QString::fromStdString(plan->files[0].name));
        QCOMPARE(model->index(0, MergePlanModel::SizeColumn).data(Qt::UserRole + 1).toULongLong(), plan->files[0].size);
        QCOMPARE(model->index(0, MergePlanModel::TensorsColumn).data().toString(),
                 QString::number(plan->files[0].tensors.size()));
        const int index = int(plan->files.size());
        QCOMPARE(model->index(index, MergePlanModel::FileColumn).data().toString(),
                 QStringLiteral("model.safetensors.index.json"));
        QCOMPARE(model->rowCount(), int(plan->files.size() + 1 + plan->config.files.size()));
    }

    void megatronMergeThroughThePanel()
    {
        MergePage page;
        page.setCheckpoint(scanFixture(kLegacy));
        SETTLED(page);
        // The plan waits for the mapping (a worker), then merges Hugging Face names.
        QTRY_VERIFY(page.planText().contains(QStringLiteral("model.layers.0.self_attn.q_proj.weight")));
        QVERIFY(page.planText().contains(QStringLiteral("mapped from megatron-legacy")));
        QVERIFY(page.commandLine().contains(QStringLiteral("--backend megatron")));
        QCOMPARE(page.planModel()->index(0, 0).data().toString(), QStringLiteral("model.safetensors"));

        const QString parent = QString::fromStdString(tessera::test::makeTempDir());
        const QString target = parent + QStringLiteral("/merged");
        page.setTargetDir(target);
        SETTLED(page);
        QVERIFY(page.canRun());
        QSignalSpy progress(page.job(), &MergeJob::progress);
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        const auto result = finished.first().first().value<MergeResult>();
        QVERIFY2(result.ok, qPrintable(result.message));
        QVERIFY(progress.count() >= 1);
        const auto last = progress.last().first().value<MergeStatus>();
        QCOMPARE(last.tensorsDone, last.tensorsTotal);
        QCOMPARE(last.bytesDone, last.bytesTotal);
        QCOMPARE(last.tensorsTotal, qint64(page.planModel()->plan()->tensors.size()));
        QVERIFY(!last.currentTensor.isEmpty());
        // Bit-exact with the reference model, as the CLI's merge is.
        const std::string reference = tessera::test::fixture("megatron_legacy_qwen2_tp2_pp2/reference");
        QVERIFY(tessera::test::readFile(target.toStdString() + "/model.safetensors")
                == tessera::test::readFile(reference + "/model.safetensors"));
        QVERIFY(page.logText().contains(QStringLiteral("Done: wrote")));

        // "Test against reference…" runs compareWithReference on a worker and logs every tensor.
        page.setReferenceDir(QString::fromStdString(reference));
        SETTLED(page); // the target is checked again after the merge
        QVERIFY(page.canTest());
        QSignalSpy compared(page.compareJob(), &CompareJob::finished);
        page.runTest();
        QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 120000);
        const auto report = compared.first().first().value<CompareResult>();
        QVERIFY2(report.ok, qPrintable(report.message));
        QCOMPARE(report.failures, 0);
        QCOMPARE(report.lines.size(), int(page.planModel()->plan()->tensors.size()));
        QVERIFY(page.logText().contains(QStringLiteral("  ok    model.layers.0.self_attn.q_proj.weight")));
        QVERIFY(page.logText().contains(QStringLiteral("OK: ")));
    }

    void ggufExportThroughThePanel()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("gguf_llama_w2_fp32/global_step_10/actor"));
        SETTLED(page);
        QComboBox* format = nullptr;
        QComboBox* outtype = nullptr;
        for (auto* box : page.findChildren<QComboBox*>()) {
            if (box->findData(QStringLiteral("gguf")) >= 0)
                format = box;
            if (box->findData(QStringLiteral("q8_0")) >= 0)
                outtype = box;
        }
        QVERIFY(format && outtype);
        QVERIFY(!outtype->isEnabled());
        format->setCurrentIndex(format->findData(QStringLiteral("gguf")));
        QVERIFY(outtype->isEnabled());
        outtype->setCurrentIndex(outtype->findData(QStringLiteral("f32")));
        SETTLED(page);
        QVERIFY2(page.planText().contains(QStringLiteral("gguf_llama_w2_fp32-f32.gguf")), qPrintable(page.planText()));
        QVERIFY(page.planText().contains(QStringLiteral("blk.0.attn_q.weight")));
        QVERIFY(page.commandLine().contains(QStringLiteral("--format gguf --outtype f32")));
        const QString target = QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/gguf");
        page.setTargetDir(target);
        SETTLED(page);
        QVERIFY(page.canRun());
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        const auto result = finished.first().first().value<MergeResult>();
        QVERIFY2(result.ok, qPrintable(result.message));
        const std::string file = target.toStdString() + "/gguf_llama_w2_fp32-f32.gguf";
        QVERIFY(QFileInfo::exists(QString::fromStdString(file)));
        // The .gguf and the Modelfile beside it, nothing else.
        QCOMPARE(QDir(target).entryList(QDir::Files | QDir::Hidden | QDir::AllDirs | QDir::NoDotAndDotDot, QDir::Name),
                 QStringList({ QStringLiteral("Modelfile"), QStringLiteral("gguf_llama_w2_fp32-f32.gguf") }));
        // Read back under Hugging Face names, the export is the reference tensor for tensor.
        QString out;
        QCOMPARE(tessera::test::runTessera({ QStringLiteral("diff"), QString::fromStdString(file),
                                             QString::fromStdString(tessera::test::fixture("gguf_llama_w2_fp32/reference")) },
                                           &out),
                 0);
        QVERIFY2(out.contains(QStringLiteral("21 identical")), qPrintable(out));
    }

    /// The GGUF type choice offers every output type with what it is for and, once the GGUF plan is on screen, the
    /// size the file would have as that type (the core's ggufFileSizesByType); picking one sets --outtype to its
    /// plain name, plans once (the sizes shown do not ask for another plan), and the plan box gives the file's size
    /// and its tensor types before anything is written.
    void ggufTypeChoiceShowsEachTypesSize()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("gguf_llama_w2_fp32/global_step_10/actor"));
        SETTLED(page);
        QComboBox* format = comboWithData(page, QStringLiteral("gguf"));
        QComboBox* outtype = comboWithData(page, QStringLiteral("q4_k_m"));
        QVERIFY(format && outtype);
        const auto& types = tessera::ggufOutTypes();
        QCOMPARE(outtype->count(), int(types.size()));
        QCOMPARE(outtype->currentData().toString(), QLatin1String(tessera::ggufOutTypeName(tessera::kDefaultGgufOutType)));
        // Safetensors chosen: no GGUF plan, no sizes.
        for (const auto& type : types)
            QCOMPARE(outtype->itemText(outtype->findData(QLatin1String(type.name))), typeItem(type, {}));

        format->setCurrentIndex(format->findData(QStringLiteral("gguf")));
        QVERIFY(page.isPlanning());
        QCOMPARE(outtype->itemText(0), typeItem(types.front(), QStringLiteral("…")));
        SETTLED(page);
        QVERIFY(page.ggufPlan());
        QCOMPARE(tessera::ggufFileSizesByType(*page.ggufPlan()).size(), types.size());
        QVERIFY(showsSizesOf(*outtype, *page.ggufPlan()));

        // The plan box gives the chosen type's file size and tensor types, as the dry run does.
        outtype->setCurrentIndex(outtype->findData(QStringLiteral("q8_0")));
        SETTLED(page);
        QVERIFY(page.ggufPlan());
        QCOMPARE(page.ggufPlan()->outType, tessera::GgufOutType::Q8_0);
        const QLabel* planBox = labelWith(page, QStringLiteral("<b>Disk</b>"));
        QVERIFY(planBox);
        QVERIFY2(planBox->text().contains(QStringLiteral("<b>Disk</b> ") + bytesText(page.ggufPlan()->fileSize)),
                 qPrintable(planBox->text()));
        const QString mix = QString::fromStdString(tessera::ggufTypeCountsText(*page.ggufPlan()));
        QVERIFY2(mix.startsWith(QStringLiteral("Q8_0 ×")), qPrintable(mix)); // the type holding most bytes first
        QVERIFY2(planBox->text().contains(QStringLiteral("<b>Tensor types</b> ") + mix.toHtmlEscaped()),
                 qPrintable(planBox->text()));
        QVERIFY2(page.planText().contains(QStringLiteral("Types       ") + mix), qPrintable(page.planText()));

        // Other options: their sizes wait for their plan.
        const auto q8Plan = page.ggufPlan();
        QCheckBox* tie = checkBox(page, QStringLiteral("--tie-word-embedding"));
        QVERIFY(tie);
        tie->setChecked(true);
        QVERIFY(page.isPlanning());
        QCOMPARE(outtype->currentText(), typeItem(tessera::ggufOutType(tessera::GgufOutType::Q8_0), QStringLiteral("…")));
        SETTLED(page);
        QVERIFY(page.ggufPlan() && page.ggufPlan() != q8Plan);
        QVERIFY(showsSizesOf(*outtype, *page.ggufPlan()));

        // Another type: the sizes, of every type, stay while it is planned (and if its plan is refused); the
        // choice plans once, and the texts it changes ask for no other plan.
        const auto sized = page.ggufPlan();
        QSignalSpy planned(&page, &MergePage::planChanged);
        outtype->setCurrentIndex(outtype->findData(QStringLiteral("q4_k_m")));
        QCOMPARE(outtype->currentData().toString(), QStringLiteral("q4_k_m"));
        QVERIFY2(page.commandLine().contains(QStringLiteral("--format gguf --outtype q4_k_m")), qPrintable(page.commandLine()));
        QVERIFY(labelWith(page, QStringLiteral("--outtype q4_k_m"))); // the command line on screen
        QVERIFY(page.isPlanning());
        QVERIFY(showsSizesOf(*outtype, *sized));
        SETTLED(page);
        QTest::qWait(200);
        QVERIFY(!page.isPlanning());
        QCOMPARE(planned.count(), 1);
        QVERIFY(showsSizesOf(*outtype, page.ggufPlan() ? *page.ggufPlan() : *sized));
        QVERIFY2(page.ggufPlan(), qPrintable(page.planText()));
        QCOMPARE(page.ggufPlan()->outType, tessera::GgufOutType::Q4_K_M);
        planBox = labelWith(page, QStringLiteral("<b>Disk</b>"));
        QVERIFY(planBox && planBox->text().contains(bytesText(page.ggufPlan()->fileSize)));
        QVERIFY(planBox->text().contains(QString::fromStdString(tessera::ggufTypeCountsText(*page.ggufPlan()))));
    }

    /// Another checkpoint starts over in safetensors: no GGUF size of the last one is left in the type choice.
    void anotherCheckpointClearsTheTypeSizes()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("gguf_llama_w2_fp32/global_step_10/actor"));
        QComboBox* format = comboWithData(page, QStringLiteral("gguf"));
        QComboBox* outtype = comboWithData(page, QStringLiteral("q4_k_m"));
        QVERIFY(format && outtype);
        format->setCurrentIndex(format->findData(QStringLiteral("gguf")));
        SETTLED(page);
        const auto& f16 = tessera::ggufOutType(tessera::GgufOutType::F16);
        QVERIFY(page.ggufPlan());
        QCOMPARE(outtype->currentText(), typeItem(f16, bytesText(page.ggufPlan()->fileSize)));
        page.setCheckpoint(scanFixture("gguf_llama256_w2_bf16/global_step_10/actor"));
        QCOMPARE(outtype->currentText(), typeItem(f16, {}));
        SETTLED(page);
        QCOMPARE(outtype->currentText(), typeItem(f16, {}));
    }

    void loraMergeThroughThePanel()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("lora_llama_w2_fp32/global_step_10/actor"));
        SETTLED(page);
        // The plan fuses the adapted weights and writes the adapter beside them, as `tessera merge` does.
        QVERIFY2(page.planText().contains(QStringLiteral("8 fused with their LoRA update")), qPrintable(page.planText()));
        QVERIFY(page.planText().contains(QStringLiteral("model.layers.0.self_attn.q_proj.weight")));
        QVERIFY(!page.planText().contains(QStringLiteral("base_layer")));
        auto* loraChoice = page.findChild<QComboBox*>();
        QVERIFY(loraChoice);
        const QString parent = QString::fromStdString(tessera::test::makeTempDir());
        const QString target = parent + QStringLiteral("/merged");
        page.setTargetDir(target);
        SETTLED(page);
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        const auto result = finished.first().first().value<MergeResult>();
        QVERIFY2(result.ok, qPrintable(result.message));
        const std::string adapter = tessera::test::fixture("lora_llama_w2_fp32/reference_adapter/adapter_model.safetensors");
        QVERIFY(tessera::test::readFile(target.toStdString() + "/lora_adapter/adapter_model.safetensors")
                == tessera::test::readFile(adapter));
        QVERIFY(QFileInfo::exists(target + QStringLiteral("/model.safetensors")));

        // The test compares the fused model within its tolerance.
        page.setReferenceDir(QString::fromStdString(tessera::test::fixture("lora_llama_w2_fp32/reference")));
        QSignalSpy compared(page.compareJob(), &CompareJob::finished);
        SETTLED(page);
        page.runTest();
        QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 120000);
        const auto report = compared.first().first().value<CompareResult>();
        QVERIFY2(report.ok, qPrintable(report.message));
        QVERIFY(page.logText().contains(QStringLiteral("LoRA-fused: within")));

        // "adapter only": the plan is the adapter's, and the command line says so.
        for (auto* box : page.findChildren<QComboBox*>())
            if (box->findData(QStringLiteral("adapter")) >= 0)
                box->setCurrentIndex(box->findData(QStringLiteral("adapter")));
        SETTLED(page);
        QVERIFY2(page.planText().contains(QStringLiteral("adapter_model.safetensors")), qPrintable(page.planText()));
        QVERIFY(page.commandLine().contains(QStringLiteral("--lora adapter")));
    }

    void testTakesTolerancesAndOffersTheDiff()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        SETTLED(page);
        page.setReferenceDir(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/reference")));
        QLineEdit* atol = nullptr;
        for (auto* edit : page.findChildren<QLineEdit*>())
            if (!atol && edit->toolTip().startsWith(QStringLiteral("Absolute tolerance")))
                atol = edit; // the first of atol, rtol
        QVERIFY(atol);
        atol->setText(QStringLiteral("-1"));
        SETTLED(page);
        page.runTest();
        // In the words of `tessera test --atol -1`.
        QVERIFY2(page.logText().contains(QStringLiteral("Not tested: --atol must be a number of 0 or more (got '-1')")),
                 qPrintable(page.logText()));
        atol->setText(QStringLiteral("1e-3"));
        QSignalSpy compared(page.compareJob(), &CompareJob::finished);
        SETTLED(page);
        page.runTest();
        QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 120000);
        QVERIFY(compared.first().first().value<CompareResult>().ok);
        QPushButton* openInDiff = nullptr;
        for (auto* button : page.findChildren<QPushButton*>())
            if (button->text() == QStringLiteral("Open in Diff"))
                openInDiff = button;
        QVERIFY(openInDiff && openInDiff->isEnabled());
        QSignalSpy requested(&page, &MergePage::openInDiffRequested);
        openInDiff->click();
        QCOMPARE(requested.count(), 1);
        const auto diff = requested.first().at(0).value<tessera::DiffRequest>(); // the test's own request
        QCOMPARE(diff.b.value_or(""), tessera::test::fixture("fsdp2_llama_w4/reference"));
        QCOMPARE(diff.atol.value_or(""), std::string("1e-3"));
        // Another reference, or another checkpoint: the test it offered no longer applies.
        page.setReferenceDir(QStringLiteral("/elsewhere"));
        QVERIFY(!openInDiff->isEnabled());
        page.setReferenceDir(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/reference")));
        SETTLED(page);
        page.runTest();
        QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 2, 120000);
        QVERIFY(openInDiff->isEnabled());
        page.setCheckpoint(scanFixture(tessera::test::kLegacy));
        SETTLED(page);
        QVERIFY(!openInDiff->isEnabled());
    }

    void replacingAModelAsksFirst()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        SETTLED(page);
        const QString target = QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/merged");
        page.setTargetDir(target);
        SETTLED(page);
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run(); // a new folder: no question
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        SETTLED(page); // the target is checked again
        QString asked;
        tessera::ui::confirmHook() = [&](QWidget*, const QString&, const QString& question) {
            asked = question;
            return false;
        };
        page.run();
        QVERIFY2(asked.contains(QStringLiteral("model.safetensors")), qPrintable(asked));
        QVERIFY(!page.job()->isRunning());
        QVERIFY(page.logText().contains(QStringLiteral("was left as it is")));
        tessera::ui::confirmHook() = [](QWidget*, const QString&, const QString&) { return true; };
        page.run();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 120000);
        QVERIFY(finished.last().first().value<MergeResult>().ok);
    }

    void anotherCheckpointStartsFromCleanOptions()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        SETTLED(page);
        page.setTargetDir(QStringLiteral("/tmp/merged-llama"));
        SETTLED(page);
        page.setReferenceDir(QStringLiteral("/tmp/reference-llama"));
        page.appendLog(QStringLiteral("merged llama"));
        // The same checkpoint again (a re-scan) keeps them.
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        SETTLED(page);
        QCOMPARE(page.request().targetDir.value_or(""), std::string("/tmp/merged-llama"));
        // Another one does not: one click must never overwrite the last merge with this checkpoint's weights.
        page.setCheckpoint(scanFixture("hsdp_qwen2_2x2/global_step_10/actor"));
        SETTLED(page);
        QVERIFY(page.request().targetDir.value_or("").empty());
        QVERIFY(page.logText().isEmpty());
        QVERIFY(!page.canRun());
        QVERIFY(!page.request().dtype);
    }

    void cancelLeavesNothing()
    {
        MergePage page;
        page.setCheckpoint(scanFixture(kLegacy));
        SETTLED(page);
        QTRY_VERIFY(page.planModel()->plan() != nullptr);
        const QString parent = QString::fromStdString(tessera::test::makeTempDir());
        page.setTargetDir(parent + QStringLiteral("/merged"));
        SETTLED(page);
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run();
        page.cancel(); // before the worker writes its first tensor
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        const auto result = finished.first().first().value<MergeResult>();
        QVERIFY(!result.ok);
        QVERIFY2(result.canceled, qPrintable(result.message));
        // Neither the target nor the engine's temporary folder next to it is left behind.
        QCOMPARE(QDir(parent).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden), QStringList());
        QVERIFY(page.logText().contains(QStringLiteral("Canceled")));
        SETTLED(page); // the target is checked again
        QVERIFY(page.canRun()); // and it can run again
    }

    void flagsDriveTheSharedMapping()
    {
        MappingPage mapping;
        MergePage page;
        page.setMappingJob(mapping.job());
        const CheckpointPtr checkpoint = scanFixture(kLegacy);
        mapping.setCheckpoint(checkpoint);
        page.setCheckpoint(checkpoint);
        QTRY_VERIFY(page.planModel()->plan() != nullptr);
        const auto tensors = page.planModel()->plan()->tensors.size();

        // Rules from the Mapping view's editor reach the plan: a strict merge refuses the unmapped o_proj …
        mapping.rulesEditor()->setPlainText(QStringLiteral("{ \"rules\": [ { \"id\": \"o_proj\", \"remove\": true } ] }"));
        mapping.flushRules();
        SETTLED(page);
        QTRY_VERIFY(!mapping.job()->isBusy());
        QVERIFY2(page.planText().contains(QStringLiteral("cannot be merged")), qPrintable(page.planText()));
        QVERIFY(page.commandLine().contains(QStringLiteral("--param_mapping")));
        QVERIFY(!page.canTest());

        // … and --no_strict writes what maps.
        QCheckBox* strict = checkBox(page, QStringLiteral("--strict"));
        QVERIFY(strict);
        strict->setChecked(false);
        SETTLED(page);
        QVERIFY(!mapping.job()->settings().strict);
        QTRY_VERIFY(page.planModel()->plan() != nullptr);
        QVERIFY(page.planModel()->plan()->tensors.size() < tensors);
        QVERIFY(!page.planText().contains(QStringLiteral("o_proj")));
        QVERIFY(page.commandLine().contains(QStringLiteral("--no_strict")));

        // --ignore_missing_params is debounced, then shared.
        QLineEdit* ignore = nullptr;
        for (auto* edit : page.findChildren<QLineEdit*>())
            if (edit->placeholderText().contains(QStringLiteral("may be missing")))
                ignore = edit;
        QVERIFY(ignore);
        ignore->setText(QStringLiteral("o_proj|linear_proj"));
        QTRY_COMPARE(mapping.job()->settings().ignoreMissing, QStringLiteral("o_proj|linear_proj"));
        QTRY_VERIFY(!mapping.job()->isBusy());
        QVERIFY(mapping.job()->outcome().result->count(tessera::MappingStatus::Ignored) > 0);
        QVERIFY(page.commandLine().contains(QStringLiteral("--ignore_missing_params 'o_proj|linear_proj'")));

        // Switches that the command line has are in the panel too.
        for (const char* flag : { "--tie-word-embedding", "--is-value-model", "--verify-replicas" })
            QVERIFY2(checkBox(page, QLatin1String(flag)), flag);
        checkBox(page, QStringLiteral("--verify-replicas"))->setChecked(true);
        QVERIFY(page.request().verifyReplicas);
        QVERIFY(page.commandLine().contains(QStringLiteral("--verify_replicas")));
    }
};

QTEST_MAIN(TestMergePage)
#include "tst_mergepage.moc"
