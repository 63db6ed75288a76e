// SPDX-License-Identifier: GPL-3.0-or-later
#include "jobs/mergejob.h"
#include "pages/mergepage.h"
#include "scan.h"
#include "testutil.h"

#include <QDir>
#include <QFileInfo>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTest>

using namespace tessera::ui;

class TestMergePage : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void plansAndMerges()
    {
        auto scanned = tessera::scanCheckpoint(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor"));
        QVERIFY_RESULT(scanned);
        const CheckpointPtr checkpoint = std::make_shared<const tessera::CheckpointInfo>(std::move(scanned).value());
        MergePage page;
        QVERIFY(!page.canRun());
        page.setCheckpoint(checkpoint);
        QVERIFY(page.planText().contains(QStringLiteral("model.embed_tokens.weight")));
        QVERIFY(!page.canRun()); // no output folder yet
        const QString target = QString::fromStdString(tessera::test::makeTempDir()) + QStringLiteral("/merged");
        page.findChildren<QLineEdit*>().at(1)->setText(target); // --target_dir
        QVERIFY(page.canRun());
        QSignalSpy finished(page.job(), &MergeJob::finished);
        page.run();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
        const auto result = finished.first().first().value<MergeResult>();
        QVERIFY2(result.ok, qPrintable(result.message));
        QVERIFY(QFileInfo::exists(target + QStringLiteral("/model.safetensors")));
    }

    void badShardSizeIsExplained()
    {
        auto scanned = tessera::scanCheckpoint(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor"));
        QVERIFY_RESULT(scanned);
        MergePage page;
        page.setCheckpoint(std::make_shared<const tessera::CheckpointInfo>(std::move(scanned).value()));
        for (auto* edit : page.findChildren<QLineEdit*>()) {
            if (edit->text() == QLatin1String("5GB"))
                edit->setText(QStringLiteral("5G"));
        }
        QVERIFY(page.planText().startsWith(QStringLiteral("--max_shard_size")));
        QVERIFY(!page.canRun());
    }
};

QTEST_MAIN(TestMergePage)
#include "tst_mergepage.moc"
