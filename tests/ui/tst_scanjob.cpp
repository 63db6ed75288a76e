// SPDX-License-Identifier: GPL-3.0-or-later
#include "jobs/scanjob.h"
#include "jobs/throughputmeter.h"
#include "testutil.h"

#include <QSignalSpy>
#include <QTest>
#include <QThread>

using namespace tessera::ui;

class TestScanJob : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void scansOnAWorker()
    {
        ScanJob job;
        QSignalSpy finished(&job, &ScanJob::finished);
        QSignalSpy failed(&job, &ScanJob::failed);
        QSignalSpy started(&job, &ScanJob::started);
        job.start(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        QCOMPARE(started.count(), 1);
        QVERIFY(job.isRunning());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QCOMPARE(failed.count(), 0);
        const auto checkpoint = finished.first().first().value<CheckpointPtr>();
        QVERIFY(checkpoint);
        QCOMPARE(checkpoint->layout, std::string("verl-fsdp"));
        QVERIFY(!checkpoint->tensors.empty());
        QVERIFY(!job.isRunning());
    }

    void reportsFailure()
    {
        ScanJob job;
        QSignalSpy finished(&job, &ScanJob::finished);
        QSignalSpy failed(&job, &ScanJob::failed);
        job.start(QStringLiteral("/nonexistent/tessera/checkpoint"));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 60000);
        QCOMPARE(finished.count(), 0);
        QVERIFY(!failed.first().first().toString().isEmpty());
    }

    void newerScanWins()
    {
        // The first scan is superseded at once: only the second one's result may arrive.
        ScanJob job;
        QSignalSpy finished(&job, &ScanJob::finished);
        QSignalSpy canceled(&job, &ScanJob::canceled);
        job.start(QString::fromStdString(tessera::test::fixture("fsdp2_llama_w4/global_step_10/actor")));
        job.start(QString::fromStdString(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QTest::qWait(200);
        QCOMPARE(finished.count(), 1);
        const auto checkpoint = finished.first().first().value<CheckpointPtr>();
        QVERIFY(checkpoint->root.find("hsdp_qwen2_2x2") != std::string::npos);
        QCOMPARE(canceled.count(), 1);
    }

    /// A scan that failed at once is still running until the page has its failure: the worker's end alone does not
    /// end it (a page that went idle then would miss the message), and a cancel meanwhile drops the failure.
    void runsUntilItsResultArrives()
    {
        ScanJob job;
        QSignalSpy failed(&job, &ScanJob::failed);
        QSignalSpy canceled(&job, &ScanJob::canceled);
        job.start(QStringLiteral("/nonexistent/tessera/checkpoint"));
        QThread::msleep(300); // the worker returns; its result waits in the event queue
        QVERIFY(job.isRunning());
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 60000);
        QVERIFY(!job.isRunning());
        job.start(QStringLiteral("/nonexistent/tessera/checkpoint"));
        QThread::msleep(300);
        job.cancel();
        QCOMPARE(canceled.count(), 1);
        QVERIFY(!job.isRunning());
        QTest::qWait(200);
        QCOMPARE(failed.count(), 1);
    }

    void cancelDropsResult()
    {
        ScanJob job;
        QSignalSpy finished(&job, &ScanJob::finished);
        job.start(QString::fromStdString(tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor")));
        job.cancel();
        QTest::qWait(500);
        QCOMPARE(finished.count(), 0);
        QVERIFY(!job.isRunning());
    }

    void throughput()
    {
        ThroughputMeter meter;
        meter.start(4'000'000'000ULL);
        QCOMPARE(meter.etaSeconds(), -1);
        meter.sample(1'000'000'000ULL, 1000);
        QCOMPARE(meter.bytesPerSecond(), 1e9);
        QCOMPARE(meter.etaSeconds(), 3);
        QCOMPARE(meter.text(), QStringLiteral("1.00 GB/s · ETA 0:03"));
        meter.sample(1'100'000'000ULL, 1100); // too soon: ignored for the rate
        QCOMPARE(meter.bytesPerSecond(), 1e9);
    }
};

QTEST_MAIN(TestScanJob)
#include "tst_scanjob.moc"
