// SPDX-License-Identifier: GPL-3.0-or-later
// The Merge and Split pages say what they will do and what they did in the always-visible status line, and their
// buttons run exactly the plan on screen: a refused GGUF export cannot run an earlier plan, a refusal or a Cancel
// is never hidden in the log, a finished run's "Done" does not outlive the options it ran with.

#include "confirm.h"
#include "jobs/mergejob.h"
#include "jobs/splitjob.h"
#include "jobs/comparejob.h"
#include "jobs/mappingjob.h"
#include "pages/mappingpage.h"
#include "pages/mergepage.h"
#include "widgets/ruleseditor.h"
#include "pages/splitpage.h"
#include "mappingfixtures.h"
#include "openfolder.h"
#include "testutil.h"

#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>

using namespace tessera::ui;
using tessera::test::scanFixture;

namespace {

template <typename Page>
QPushButton* button(const Page& page, const QString& text)
{
    for (auto* b : page.template findChildren<QPushButton*>())
        if (b->text() == text)
            return b;
    return nullptr;
}

QComboBox* comboWithData(const QWidget& page, const QString& data)
{
    for (auto* box : page.findChildren<QComboBox*>())
        if (box->findData(data) >= 0)
            return box;
    return nullptr;
}

QString plannedText(const QWidget& page)
{
    QString text;
    for (auto* label : page.findChildren<QLabel*>())
        if (label->textFormat() == Qt::RichText)
            text += label->text();
    return text;
}

QStringList entries(const QString& dir)
{
    return QDir(dir).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden);
}

} // namespace

/// The pages plan on a worker: waits for the plan of the options just set.
#define SETTLED(page) QTRY_VERIFY_WITH_TIMEOUT(!(page).isPlanning(), 60000)

class TestRunOutcomes : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void init()
    {
        confirmHook() = [](QWidget*, const QString&, const QString&) { return true; };
    }

    /// Point 3: GGUF of a checkpoint without a tokenizer is refused; Merge is disabled, the status says why, and
    /// pressing Merge anyway writes nothing (not the safetensors folder of the plan before).
    void refusedGgufCannotRunAnEarlierPlan()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        const QString target = QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/out");
        page.setTargetDir(target);
        SETTLED(page);
        QComboBox* dtype = comboWithData(page, QStringLiteral("bf16"));
        QVERIFY(dtype);
        dtype->setCurrentIndex(dtype->findData(QStringLiteral("bf16")));
        SETTLED(page);
        QVERIFY(page.canRun()); // the safetensors plan runs
        QComboBox* format = comboWithData(page, QStringLiteral("gguf"));
        QVERIFY(format);
        format->setCurrentIndex(format->findData(QStringLiteral("gguf")));
        SETTLED(page);
        QVERIFY2(page.planText().contains(QStringLiteral("GGUF")), qPrintable(page.planText()));
        QVERIFY(!page.canRun());
        QVERIFY(!button(page, QStringLiteral("Merge"))->isEnabled());
        QVERIFY2(!page.statusText().contains(QStringLiteral("Ready")), qPrintable(page.statusText()));
        QVERIFY2(page.statusText().contains(QStringLiteral("GGUF")), qPrintable(page.statusText()));
        QVERIFY(page.commandLine().contains(QStringLiteral("--format gguf")));
        page.run();
        QVERIFY(!page.job()->isRunning());
        QTest::qWait(200);
        QVERIFY(!QFileInfo::exists(target));
    }

    /// Point 4: a refused target is said in the status line, and the plan box starts with the refusal.
    void refusedTargetIsInTheStatusLine()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        const QString target = QString::fromStdString(tessera::test::makeTempDir());
        QFile weights(target + QStringLiteral("/other-model.safetensors"));
        QVERIFY(weights.open(QIODevice::WriteOnly));
        weights.write("not ours");
        weights.close();
        page.setTargetDir(target);
        SETTLED(page);
        QVERIFY(!page.canRun());
        QVERIFY2(page.statusText().startsWith(QStringLiteral("Refused")), qPrintable(page.statusText()));
        QVERIFY2(page.statusText().contains(QStringLiteral("already holds weight files")), qPrintable(page.statusText()));
        const QString plan = plannedText(page);
        QVERIFY2(plan.indexOf(QStringLiteral("already holds weight files")) < plan.indexOf(QStringLiteral("Writes")),
                 qPrintable(plan));
    }

    /// Point 4: a model the merge cannot plan says so in the status line, and the plan box points to the Summary
    /// page for the list of problems, not to a command line.
    void refusedModelIsInTheStatusLine()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        page.setTargetDir(QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/out"));
        QComboBox* format = comboWithData(page, QStringLiteral("gguf"));
        format->setCurrentIndex(format->findData(QStringLiteral("gguf")));
        SETTLED(page);
        QVERIFY2(page.statusText().startsWith(QStringLiteral("Refused")), qPrintable(page.statusText()));
        QVERIFY2(!page.statusText().contains(QStringLiteral("see the plan box")), qPrintable(page.statusText()));
    }

    /// Point 4: the plan box of a checkpoint with problems points to the Summary page for their list.
    void problemsPointToTheSummaryPage()
    {
        MappingPage mapping;
        MergePage page;
        page.setMappingJob(mapping.job());
        const CheckpointPtr checkpoint = scanFixture(tessera::test::kLegacy);
        mapping.setCheckpoint(checkpoint);
        page.setCheckpoint(checkpoint);
        SETTLED(page);
        mapping.rulesEditor()->setPlainText(QStringLiteral("{ \"rules\": [ { \"id\": \"o_proj\", \"remove\": true } ] }"));
        mapping.flushRules();
        QTRY_VERIFY(!mapping.job()->isBusy());
        SETTLED(page);
        QVERIFY2(page.planText().contains(QStringLiteral("problem")), qPrintable(page.planText()));
        const QString plan = plannedText(page);
        QVERIFY2(plan.contains(QStringLiteral("Summary page")), qPrintable(plan));
        QVERIFY2(!plan.contains(QStringLiteral("tessera inspect")), qPrintable(plan));
        QVERIFY2(page.statusText().startsWith(QStringLiteral("Refused")), qPrintable(page.statusText()));
    }

    /// Point 4: Cancel is said in the status line, and stays there after the target is checked again.
    void cancelIsInTheStatusLine()
    {
        MergePage page;
        page.setCheckpoint(scanFixture(tessera::test::kLegacy));
        page.setTargetDir(QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/merged"));
        SETTLED(page);
        QVERIFY(page.canRun());
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run();
        page.cancel();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        SETTLED(page);
        QTest::qWait(100);
        QCOMPARE(page.statusText(), QStringLiteral("Canceled; nothing was written."));
    }

    /// Point 4: a test that cannot even start (no such reference) says so in the status line, not only in the log.
    void failedTestIsInTheStatusLine()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        SETTLED(page);
        page.setReferenceDir(QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/no-such-reference"));
        QSignalSpy compared(page.compareJob(), &CompareJob::finished);
        page.runTest();
        QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 120000);
        QVERIFY(!compared.first().first().value<CompareResult>().ok);
        QTest::qWait(50);
        QVERIFY2(page.statusText().startsWith(QStringLiteral("Test failed")), qPrintable(page.statusText()));
    }

    /// Point 7: "Done: wrote … to <folder>" does not stay once the output folder is another.
    void doneDoesNotOutliveItsFolder()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        const QString parent = QString::fromStdString(tessera::test::makeTempDir());
        page.setTargetDir(parent + QStringLiteral("/first"));
        SETTLED(page);
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        SETTLED(page);
        QVERIFY2(page.statusText().startsWith(QStringLiteral("Done")), qPrintable(page.statusText()));
        page.setTargetDir(parent + QStringLiteral("/second"));
        SETTLED(page);
        QVERIFY2(!page.statusText().contains(QStringLiteral("first")), qPrintable(page.statusText()));
        QCOMPARE(page.statusText(), QStringLiteral("Ready to merge."));
        QCOMPARE(page.findChild<QProgressBar*>()->value(), 0);
    }

    /// Point 7, on the Split page: its "Done" and full bar go once the output folder is another.
    void splitDoneDoesNotOutliveItsFolder()
    {
        SplitPage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        page.setFormat(QStringLiteral("dcp"));
        const QString parent = QString::fromStdString(tessera::test::makeTempDir());
        page.setTargetDir(parent + QStringLiteral("/first"));
        SETTLED(page);
        QSignalSpy finished(page.job(), &SplitJob::finished);
        page.run();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        SETTLED(page);
        QVERIFY2(page.statusText().startsWith(QStringLiteral("Done")), qPrintable(page.statusText()));
        page.setTargetDir(parent + QStringLiteral("/second"));
        SETTLED(page);
        QCOMPARE(page.statusText(), QStringLiteral("Ready to split."));
        QCOMPARE(page.findChild<QProgressBar*>()->value(), 0);
        // A refused model is said in the status line too.
        page.setFormat(QStringLiteral("megatron"));
        page.setMegatronSizes(3, 1);
        SETTLED(page);
        QVERIFY(!page.canRun());
        QVERIFY2(page.statusText().startsWith(QStringLiteral("Refused")), qPrintable(page.statusText()));
    }

    /// Point 12: merging into a folder of other files asks once, naming them (and a model it replaces), and keeps
    /// them; `tessera merge` lists them too. No "…." in the question.
    void otherFilesInTheTargetAreNamed()
    {
        MergePage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        const QString target = QString::fromStdString(tessera::test::makeTempDir());
        QFile notes(target + QStringLiteral("/notes.txt"));
        QVERIFY(notes.open(QIODevice::WriteOnly));
        notes.write("mine");
        notes.close();
        page.setTargetDir(target);
        SETTLED(page);
        QVERIFY(page.canRun());
        QStringList asked;
        confirmHook() = [&](QWidget*, const QString&, const QString& question) {
            asked << question;
            return false;
        };
        page.run();
        QCOMPARE(asked.size(), 1);
        QVERIFY2(asked.first().contains(QStringLiteral("notes.txt")), qPrintable(asked.first()));
        QVERIFY(!page.job()->isRunning());
        QCOMPARE(entries(target), QStringList { QStringLiteral("notes.txt") });

        confirmHook() = [&](QWidget*, const QString&, const QString& question) {
            asked << question;
            return true;
        };
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run();
        QCOMPARE(asked.size(), 2);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        QVERIFY(finished.first().first().value<MergeResult>().ok);
        QVERIFY(QFileInfo::exists(target + QStringLiteral("/notes.txt")));
        SETTLED(page);
        // Again: one question for the model it replaces (five files) and the notes it keeps.
        page.run();
        QCOMPARE(asked.size(), 3);
        QVERIFY2(asked.last().contains(QStringLiteral("model.safetensors")) && asked.last().contains(QStringLiteral("notes.txt")),
                 qPrintable(asked.last()));
        QVERIFY2(!asked.last().contains(QStringLiteral("….")), qPrintable(asked.last()));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 120000);

        // The command line goes on, but not silently: it names what it keeps, in a dry run and a real one.
        const QStringList args { QStringLiteral("merge"), QStringLiteral("--local_dir"),
                                 QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")),
                                 QStringLiteral("--target_dir"), target };
        for (const QStringList& run : { args + QStringList { QStringLiteral("--dry-run") }, args }) {
            QString out, err;
            QCOMPARE(tessera::test::runTessera(run, &out, &err), 0);
            QVERIFY2(err.contains(QStringLiteral("file(s) this merge does not write")) && err.contains(QStringLiteral("notes.txt")),
                     qPrintable(err));
            QVERIFY2(!err.contains(QStringLiteral("model.safetensors")), qPrintable(err));
        }
        QVERIFY(QFileInfo::exists(target + QStringLiteral("/notes.txt")));
    }

    /// Point 12, on the Split page: a target of other files is asked about once, and `tessera split` names them.
    void splitIntoOtherFilesAsksOnce()
    {
        SplitPage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        page.setFormat(QStringLiteral("dcp"));
        const QString target = QString::fromStdString(tessera::test::makeTempDir());
        QFile notes(target + QStringLiteral("/notes.txt"));
        QVERIFY(notes.open(QIODevice::WriteOnly));
        notes.write("mine");
        notes.close();
        page.setTargetDir(target);
        SETTLED(page);
        QVERIFY(page.canRun());
        QStringList asked;
        confirmHook() = [&](QWidget*, const QString&, const QString& question) {
            asked << question;
            return false;
        };
        page.run();
        QCOMPARE(asked.size(), 1);
        QVERIFY2(asked.first().contains(QStringLiteral("notes.txt")), qPrintable(asked.first()));
        QVERIFY(!page.job()->isRunning());
        QCOMPARE(entries(target), QStringList { QStringLiteral("notes.txt") });

        QString out, err;
        QCOMPARE(tessera::test::runTessera({ QStringLiteral("split"), QStringLiteral("--local_dir"),
                                             QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")),
                                             QStringLiteral("--format"), QStringLiteral("dcp"), QStringLiteral("--world_size"),
                                             QStringLiteral("2"), QStringLiteral("--target_dir"),
                                             target, QStringLiteral("--dry-run") },
                                           &out, &err),
                 0);
        QVERIFY2(err.contains(QStringLiteral("file(s) this split does not write")) && err.contains(QStringLiteral("notes.txt")),
                 qPrintable(err));
    }

    /// Point 12: "Open Output" after a merge and after a split opens the folder written, and goes with the options.
    void openOutputAfterARun()
    {
        QStringList opened;
        openFolderHook() = [&](const QString& folder) {
            opened << folder;
            return true;
        };
        MergePage merge;
        merge.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        const QString parent = QString::fromStdString(tessera::test::makeTempDir());
        merge.setTargetDir(parent + QStringLiteral("/merged"));
        SETTLED(merge);
        QPushButton* open = button(merge, QStringLiteral("Open Output"));
        QVERIFY(open);
        QVERIFY(!open->isEnabled());
        QSignalSpy merged(merge.job(), &MergeJob::finished);
        merge.run();
        QTRY_COMPARE_WITH_TIMEOUT(merged.count(), 1, 120000);
        SETTLED(merge);
        QVERIFY(open->isEnabled());
        open->click();
        QCOMPARE(opened.size(), 1);
        QCOMPARE(QFileInfo(opened.first()).canonicalFilePath(), QFileInfo(parent + QStringLiteral("/merged")).canonicalFilePath());
        merge.setTargetDir(parent + QStringLiteral("/other"));
        SETTLED(merge);
        QVERIFY(!open->isEnabled());

        SplitPage split;
        split.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        split.setFormat(QStringLiteral("dcp"));
        split.setTargetDir(parent + QStringLiteral("/dcp"));
        SETTLED(split);
        QPushButton* openSplit = button(split, QStringLiteral("Open Output"));
        QVERIFY(openSplit);
        QVERIFY(!openSplit->isEnabled());
        QSignalSpy written(split.job(), &SplitJob::finished);
        split.run();
        QTRY_COMPARE_WITH_TIMEOUT(written.count(), 1, 120000);
        SETTLED(split);
        QVERIFY(openSplit->isEnabled());
        openSplit->click();
        QCOMPARE(opened.size(), 2);
        QCOMPARE(QFileInfo(opened.last()).canonicalFilePath(), QFileInfo(parent + QStringLiteral("/dcp")).canonicalFilePath());
    }

    /// Point 12: a canceled split leaves the bar empty, not where the last progress report put it.
    void splitCancelEmptiesTheBar()
    {
        SplitPage page;
        page.setCheckpoint(scanFixture("fsdp2_llama_w4/global_step_10/actor"));
        page.setFormat(QStringLiteral("dcp"));
        page.setWorldSize(2);
        const QString parent = QString::fromStdString(tessera::test::makeTempDir());
        page.setTargetDir(parent + QStringLiteral("/dcp"));
        SETTLED(page);
        QVERIFY(page.canRun());
        QSignalSpy finished(page.job(), &SplitJob::finished);
        QSignalSpy progress(page.job(), &SplitJob::progress);
        // Cancel on the first report of progress, as a user does while the bar moves.
        connect(page.job(), &SplitJob::progress, &page, [&] { page.cancel(); });
        page.run();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        SETTLED(page);
        QTest::qWait(300); // reports still queued would land now
        const auto result = finished.first().first().value<SplitResult>();
        QVERIFY2(result.canceled, qPrintable(result.message));
        QVERIFY(progress.count() > 0);
        QCOMPARE(page.findChild<QProgressBar*>()->value(), 0);
        QVERIFY2(page.statusText().startsWith(QStringLiteral("Canceled")), qPrintable(page.statusText()));
        QCOMPARE(entries(parent), QStringList());
    }
};

QTEST_MAIN(TestRunOutcomes)
#include "tst_runoutcomes.moc"
