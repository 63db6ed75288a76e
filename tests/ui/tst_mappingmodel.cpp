// SPDX-License-Identifier: GPL-3.0-or-later
#include "jobs/mappingjob.h"
#include "mappingfixtures.h"
#include "mapping/megatron_mapping.h"
#include "models/mappingfilterproxy.h"
#include "models/mappingmodel.h"
#include "models/roles.h"
#include "formats/scan.h"
#include "synthetic.h"
#include "testutil.h"

#include <QAbstractItemModelTester>
#include <QColor>
#include <QGuiApplication>
#include <QPalette>
#include <QTest>

using namespace tessera::ui;
using tessera::MappingStatus;

using tessera::test::countStatus;
using tessera::test::kDist;
using tessera::test::kLegacy;
using tessera::test::scanFixture;

class TestMappingModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void identityRows()
    {
        MappingModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        model.setOutcome(MappingJob::evaluate(tessera::test::smallCheckpoint(), {}));
        QCOMPARE(model.rowCount(), 4);
        QCOMPARE(model.columnCount(), int(MappingModel::ColumnCount));
        QVERIFY(!model.outcome().megatron);
        QCOMPARE(model.index(0, MappingModel::SourceColumn).data().toString(), QStringLiteral("model.w"));
        QCOMPARE(model.index(0, MappingModel::TargetColumn).data().toString(), QStringLiteral("model.w"));
        QCOMPARE(model.index(0, MappingModel::TransformColumn).data().toString(), QStringLiteral("copy"));
        QCOMPARE(model.index(0, MappingModel::SourceShapeColumn).data().toString(), QStringLiteral("[8, 4]"));
        QCOMPARE(model.index(0, MappingModel::SourceShapeColumn).data(SortRole).toULongLong(), 32ULL);
        QCOMPARE(model.index(2, MappingModel::StatusColumn).data().toString(), QStringLiteral("ok"));
        QCOMPARE(model.index(3, 0).data(TensorIndexRole).toInt(), 3);
        // ok rows keep the palette's colours.
        QVERIFY(!model.index(0, MappingModel::StatusColumn).data(Qt::ForegroundRole).isValid());
        model.setOutcome(MappingJob::evaluate(nullptr, {}));
        QCOMPARE(model.rowCount(), 0);
    }

    void peftNamesAreFlagged()
    {
        auto info = std::make_shared<tessera::CheckpointInfo>(*tessera::test::smallCheckpoint());
        info->tensors[1].name = "base_model.model.layers.0.q_proj.lora_A.weight";
        MappingModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setOutcome(MappingJob::evaluate(info, {}));
        QCOMPARE(model.index(1, MappingModel::StatusColumn).data().toString(), QStringLiteral("unexpected"));
        QVERIFY(model.index(1, 0).data(MappingModel::DetailRole).toString().contains(QStringLiteral("LoRA")));
        QVERIFY(model.index(1, 0).data(Qt::ToolTipRole).toString().contains(QStringLiteral("LoRA")));
        QCOMPARE(model.index(1, MappingModel::StatusColumn).data(Qt::ForegroundRole).value<QBrush>().color(),
                 MappingModel::statusColor(MappingStatus::Unexpected, QGuiApplication::palette()));
    }

    void statusColors()
    {
        const QPalette pal = QGuiApplication::palette();
        QVERIFY(!MappingModel::statusColor(MappingStatus::Ok, pal).isValid());
        const QColor red = MappingModel::statusColor(MappingStatus::Unmapped, pal);
        QCOMPARE(MappingModel::statusColor(MappingStatus::Missing, pal), red);
        QCOMPARE(MappingModel::statusColor(MappingStatus::ShapeMismatch, pal), red);
        QCOMPARE(MappingModel::statusColor(MappingStatus::Ignored, pal), MappingModel::statusColor(MappingStatus::Tied, pal));
        QCOMPARE(MappingModel::statusColor(MappingStatus::Duplicate, pal), MappingModel::statusColor(MappingStatus::Unexpected, pal));
        QVERIFY(red.red() > red.green() * 2);
        QVERIFY(MappingModel::isProblem(MappingStatus::Duplicate));
        QVERIFY(!MappingModel::isProblem(MappingStatus::Tied));
        QCOMPARE(MappingModel::statuses().size(), 8);
    }

    void megatronFixtures_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addRow("legacy qwen2") << QString::fromLatin1(kLegacy);
        QTest::addRow("torch_dist llama") << QString::fromLatin1(kDist);
    }

    void megatronFixtures()
    {
        QFETCH(QString, fixture);
        const CheckpointPtr checkpoint = scanFixture(fixture.toStdString());
        MappingModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        const MappingOutcome outcome = MappingJob::evaluate(checkpoint, {});
        QVERIFY2(outcome.error.isEmpty(), qPrintable(outcome.error));
        QVERIFY(outcome.megatron);
        QVERIFY(outcome.mapped);
        model.setOutcome(outcome);
        QVERIFY(model.rowCount() > 10);
        QCOMPARE(model.headerData(MappingModel::SourceColumn, Qt::Horizontal).toString(), QStringLiteral("Megatron name"));
        QCOMPARE(countStatus(model, MappingStatus::Unmapped) + countStatus(model, MappingStatus::Missing)
                     + countStatus(model, MappingStatus::ShapeMismatch),
                 0);
        // Every source row points at a tensor of the scanned checkpoint, stacked torch_dist rows ("name[3]") too.
        for (int r = 0; r < model.rowCount(); ++r) {
            const int tensor = model.index(r, 0).data(TensorIndexRole).toInt();
            QVERIFY(tensor >= 0 && tensor < int(checkpoint->tensors.size()));
            const QString name = QString::fromStdString(checkpoint->tensors[std::size_t(tensor)].name);
            QVERIFY2(model.index(r, MappingModel::SourceColumn).data().toString().startsWith(name), qPrintable(name));
        }
        bool qkv = false;
        for (int r = 0; r < model.rowCount(); ++r)
            qkv = qkv || model.index(r, MappingModel::TransformColumn).data().toString().contains(QStringLiteral("split_qkv"));
        QVERIFY(qkv);
        // The table is the core's: the same rows mapMegatronToHf gives the CLI.
        auto direct = tessera::mapMegatronToHf(*checkpoint, {});
        QVERIFY_RESULT(direct);
        QCOMPARE(model.rowCount(), int(direct->rows.size()));
        QCOMPARE(outcome.mapped->tensors.size(), direct->mapped.tensors.size());
    }

    void removedRuleLeavesUnmappedAndMissing()
    {
        const CheckpointPtr checkpoint = scanFixture(kLegacy);
        MappingSettings settings;
        settings.rulesText = QStringLiteral(R"({ "rules": [ { "id": "o_proj", "remove": true } ] })");
        const MappingOutcome outcome = MappingJob::evaluate(checkpoint, settings);
        QVERIFY2(outcome.error.isEmpty(), qPrintable(outcome.error));
        QVERIFY(outcome.result->count(MappingStatus::Unmapped) > 0);
        QVERIFY(outcome.result->count(MappingStatus::Missing) > 0);
        QCOMPARE(QString::fromStdString(outcome.result->ruleSources.back()), QStringLiteral("rules editor"));
        // --ignore_missing_params turns both into "ignored".
        settings.ignoreMissing = QStringLiteral("o_proj|linear_proj");
        const MappingOutcome ignored = MappingJob::evaluate(checkpoint, settings);
        QCOMPARE(ignored.result->count(MappingStatus::Unmapped), std::size_t(0));
        QCOMPARE(ignored.result->count(MappingStatus::Missing), std::size_t(0));
        QVERIFY(ignored.result->count(MappingStatus::Ignored) > 0);
    }

    void syntaxErrorHasLineAndColumn()
    {
        MappingSettings settings;
        settings.rulesName = QStringLiteral("/tmp/my_rules.json");
        settings.rulesText = QStringLiteral("{\n  \"rules\": [\n    { \"id\": \"x\", }\n  ]\n}\n");
        const MappingOutcome outcome = MappingJob::evaluate(scanFixture(kLegacy), settings);
        QVERIFY(!outcome.mapped);
        QCOMPARE(outcome.errorLine, 3);
        QVERIFY(outcome.errorColumn > 1);
        QVERIFY2(outcome.error.startsWith(QStringLiteral("/tmp/my_rules.json: ")), qPrintable(outcome.error));
        QVERIFY2(!outcome.error.contains(QStringLiteral("json.exception")), qPrintable(outcome.error));
        // The position is the page's to show ("Line 3, column 17: …"), once.
        QVERIFY2(!outcome.error.contains(QStringLiteral("at line")), qPrintable(outcome.error));
    }

    void ruleErrorPointsAtTheRule()
    {
        MappingSettings settings;
        settings.rulesText = QStringLiteral("{\n  \"rules\": [\n    { \"id\": \"good\", \"megatron\": \"a.weight\", \"hf\": \"b.weight\" },\n"
                                            "    { \"id\": \"bad\", \"megatron\": \"c.weight\", \"hf\": \"d.weight\",\n"
                                            "      \"transform\": \"squash\" }\n  ]\n}\n");
        const MappingOutcome outcome = MappingJob::evaluate(scanFixture(kLegacy), settings);
        QVERIFY(!outcome.mapped);
        QVERIFY2(outcome.error.contains(QStringLiteral("squash")), qPrintable(outcome.error));
        QVERIFY2(outcome.error.startsWith(QStringLiteral("rules editor")), qPrintable(outcome.error));
        QVERIFY2(!outcome.error.contains(QStringLiteral("tessera-rules-")), qPrintable(outcome.error));
        QCOMPARE(outcome.errorLine, 4);
    }

    void statusAndTextFilter()
    {
        const CheckpointPtr checkpoint = scanFixture(kLegacy);
        MappingModel model;
        MappingFilterProxy proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        MappingSettings settings;
        settings.rulesText = QStringLiteral(R"({ "rules": [ { "id": "o_proj", "remove": true } ] })");
        model.setOutcome(MappingJob::evaluate(checkpoint, settings));
        const int all = model.rowCount();
        QCOMPARE(proxy.rowCount(), all);
        const int unmapped = countStatus(model, MappingStatus::Unmapped);
        const int missing = countStatus(model, MappingStatus::Missing);
        proxy.setStatusFilter(int(MappingStatus::Unmapped));
        QCOMPARE(proxy.rowCount(), unmapped);
        proxy.setStatusFilter(MappingFilterProxy::ProblemStatuses);
        QCOMPARE(proxy.rowCount(), unmapped + missing);
        proxy.setFilterRegularExpression(QStringLiteral("layers\\.0\\."));
        QVERIFY(proxy.rowCount() > 0 && proxy.rowCount() < unmapped + missing);
        proxy.setStatusFilter(MappingFilterProxy::AllStatuses);
        proxy.setFilterRegularExpression(QString());
        QCOMPARE(proxy.rowCount(), all);
        // The status column sorts what needs attention first.
        proxy.sort(MappingModel::StatusColumn, Qt::AscendingOrder);
        QCOMPARE(proxy.index(0, MappingModel::StatusColumn).data().toString(), QStringLiteral("missing"));
    }
};

QTEST_MAIN(TestMappingModel)
#include "tst_mappingmodel.moc"
