// SPDX-License-Identifier: GPL-3.0-or-later
#include "models/roles.h"
#include "models/shardtreemodel.h"
#include "models/shardtreeproxy.h"
#include "formats/scan.h"
#include "synthetic.h"
#include "testutil.h"

#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QTest>

#include <filesystem>

using namespace tessera::ui;
using tessera::test::copyFixtureFolder;
using tessera::test::largeCheckpoint;
using tessera::test::smallCheckpoint;

namespace {

/// "name | size | dtype | shape | placement | problem" per row, indented by depth: failures read like diffs.
void dump(const QAbstractItemModel& model, const QModelIndex& parent, int depth, QStringList& out)
{
    for (int row = 0; row < model.rowCount(parent); ++row) {
        QStringList cells;
        for (int column = 0; column < model.columnCount(parent); ++column)
            cells << model.index(row, column, parent).data().toString();
        out << QString(depth * 2, QLatin1Char(' ')) + cells.join(QStringLiteral(" | "));
        dump(model, model.index(row, 0, parent), depth + 1, out);
    }
}

QStringList dump(const QAbstractItemModel& model)
{
    QStringList out;
    dump(model, {}, 0, out);
    return out;
}

} // namespace

class TestShardTreeModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void byFile()
    {
        ShardTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setCheckpoint(smallCheckpoint());
        const QStringList rows = dump(model);
        const QStringList expected {
            QStringLiteral("run |  |  |  |  | "),
            QStringLiteral("  global_step_5 |  |  |  |  | "),
            QStringLiteral("    actor | 138 B |  | 4 tensors | verl-fsdp · world size 2 | "),
            QStringLiteral("      rank_0.pt | 66 B |  | 4 tensors | rank 0 | "),
            QStringLiteral("        model.w | 32 B | BF16 | [8, 4] | [0:4, 0:4] | "),
            QStringLiteral("          rank 0 | 32 B | BF16 | [4, 4] | [0:4, 0:4] | "),
            QStringLiteral("        model.b | 8 B | BF16 | [4] | [0:4] | "),
            QStringLiteral("          rank 0 | 8 B | BF16 | [4] | [0:4] | "),
            QStringLiteral("        model.gappy | 24 B | BF16 | [8, 4] | [0:3, 0:4] | rows 3–4 are held by no rank"),
            QStringLiteral("          rank 0 | 24 B | BF16 | [3, 4] | [0:3, 0:4] | "),
            QStringLiteral("        model.scale | 2 B | BF16 | [] | [] | "),
            QStringLiteral("          rank 0 | 2 B | BF16 | [] | [] | "),
            QStringLiteral("      rank_1.pt | 72 B |  | 3 tensors | rank 1 | file is truncated"),
            QStringLiteral("        model.w | 32 B | BF16 | [8, 4] | [4:8, 0:4] | "),
            QStringLiteral("          rank 1 | 32 B | BF16 | [4, 4] | [4:8, 0:4] | "),
            QStringLiteral("        model.b | 8 B | BF16 | [4] | [0:4] · replica | "),
            QStringLiteral("          rank 1 · replica | 8 B | BF16 | [4] | [0:4] | "),
            QStringLiteral("        model.gappy | 32 B | BF16 | [8, 4] | [4:8, 0:4] | rows 3–4 are held by no rank"),
            QStringLiteral("          rank 1 | 32 B | BF16 | [4, 4] | [4:8, 0:4] | "),
        };
        if (rows != expected)
            qWarning().noquote() << rows.join(QLatin1Char('\n'));
        QCOMPARE(rows, expected);
    }

    void problemsAreRed()
    {
        ShardTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setProblemColor(QColor(Qt::red));
        model.setCheckpoint(smallCheckpoint());
        const QModelIndex gappy = model.indexForTensor(2);
        QVERIFY(gappy.isValid());
        QCOMPARE(gappy.data().toString(), QStringLiteral("model.gappy"));
        QCOMPARE(gappy.data(Qt::ForegroundRole).value<QColor>(), QColor(Qt::red));
        QVERIFY(gappy.data(Qt::ToolTipRole).toString().contains(QStringLiteral("held by no rank")));
        QCOMPARE(gappy.data(ProblemRole).toString(), QStringLiteral("rows 3–4 are held by no rank"));
        QVERIFY(!model.indexForTensor(0).data(Qt::ForegroundRole).isValid());
        const QModelIndex file1 = model.index(1, 0, model.checkpointIndex());
        QCOMPARE(file1.data(ProblemRole).toString(), QStringLiteral("file is truncated"));
        QCOMPARE(model.index(0, ShardTreeModel::SizeColumn, model.checkpointIndex()).data(SortRole).toULongLong(), 66ULL);
    }

    void truncatedRankFlagsEveryTensorItHeld()
    {
        const std::string copy = copyFixtureFolder("fsdp2_llama_w4");
        const std::string rank2 = copy + "/global_step_10/actor/model_world_size_4_rank_2.pt";
        std::filesystem::resize_file(rank2, std::filesystem::file_size(rank2) / 2);
        auto scanned = tessera::scanCheckpoint(copy + "/global_step_10/actor");
        QVERIFY_RESULT(scanned);
        auto info = std::make_shared<const tessera::CheckpointInfo>(std::move(*scanned));
        ShardTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setGroupBy(ShardTreeModel::GroupBy::Tensor);
        model.setCheckpoint(info);
        for (int i = 0; i < model.tensorCount(); ++i) {
            const QModelIndex entry = model.indexForTensor(i);
            QVERIFY2(entry.data(ProblemRole).toString().startsWith(QStringLiteral("incomplete: ")),
                     qPrintable(entry.data().toString()));
        }
        // The file's row names the file once: its problem does not repeat the path.
        model.setGroupBy(ShardTreeModel::GroupBy::File);
        const QModelIndex actorRow = model.checkpointIndex();
        bool fileFlagged = false;
        for (int r = 0; r < model.rowCount(actorRow); ++r) {
            const QString problem = model.index(r, 0, actorRow).data(ProblemRole).toString();
            if (problem.isEmpty())
                continue;
            QVERIFY2(problem.startsWith(QStringLiteral("incomplete")) || problem.startsWith(QStringLiteral("no ZIP")),
                     qPrintable(problem));
            fileFlagged = fileFlagged || problem.startsWith(QStringLiteral("no ZIP"));
        }
        QVERIFY(fileFlagged);
        model.setGroupBy(ShardTreeModel::GroupBy::Tensor);
        // The problem count the summary shows is the file plus each tensor.
        QCOMPARE(info->problems.size(), info->tensors.size() + 1);
        ShardTreeProxy proxy;
        proxy.setSourceModel(&model);
        proxy.setProblemsOnly(true);
        QCOMPARE(proxy.rowCount(proxy.mapFromSource(model.checkpointIndex())), model.tensorCount());
    }

    void byTensor()
    {
        ShardTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setCheckpoint(smallCheckpoint());
        model.setGroupBy(ShardTreeModel::GroupBy::Tensor);
        const QModelIndex root = model.checkpointIndex();
        QCOMPARE(model.rowCount(root), 4);
        const QModelIndex bias = model.index(1, 0, root);
        QCOMPARE(bias.data().toString(), QStringLiteral("model.b"));
        QCOMPARE(model.rowCount(bias), 2);
        QCOMPARE(model.index(1, ShardTreeModel::PlacementColumn, bias).data().toString(), QStringLiteral("[0:4] in rank_1.pt"));
        QCOMPARE(model.index(1, 0, bias).data(PieceIndexRole).toInt(), 1);
        QCOMPARE(model.index(1, 0, bias).data(TensorIndexRole).toInt(), 1);
        QCOMPARE(model.indexForTensor(3), model.index(3, 0, root));
        // Problems about a file that is not a group in this mode land on the checkpoint row.
        QVERIFY(root.data(ProblemRole).toString().contains(QStringLiteral("file is truncated")));
        model.setGroupBy(ShardTreeModel::GroupBy::File);
        QCOMPARE(model.rowCount(model.checkpointIndex()), 2);
    }

    void byTensorFollowsTheModel()
    {
        auto info = std::make_shared<tessera::CheckpointInfo>(*smallCheckpoint());
        info->problems.clear();
        tessera::TensorInfo base = info->tensors.front();
        info->tensors.clear();
        for (const char* name : { "output_layer.weight", "decoder.layers.10.mlp.linear_fc1.weight",
                                  "decoder.final_layernorm.weight", "decoder.layers.2.self_attention.linear_qkv.weight",
                                  "decoder.layers.2.mlp.linear_fc1.weight", "embedding.word_embeddings.weight" }) {
            base.name = name;
            info->tensors.push_back(base);
        }
        ShardTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setCheckpoint(info);
        model.setGroupBy(ShardTreeModel::GroupBy::Tensor);
        const QModelIndex root = model.checkpointIndex();
        QStringList order;
        for (int r = 0; r < model.rowCount(root); ++r)
            order << model.index(r, 0, root).data().toString();
        QCOMPARE(order, (QStringList { QStringLiteral("embedding.word_embeddings.weight"),
                                       QStringLiteral("decoder.layers.2.self_attention.linear_qkv.weight"),
                                       QStringLiteral("decoder.layers.2.mlp.linear_fc1.weight"),
                                       QStringLiteral("decoder.layers.10.mlp.linear_fc1.weight"),
                                       QStringLiteral("decoder.final_layernorm.weight"),
                                       QStringLiteral("output_layer.weight") }));
        // Rows and tensors still find each other.
        QCOMPARE(model.indexForTensor(0).data().toString(), QStringLiteral("output_layer.weight"));
        QCOMPARE(model.indexForTensor(0).row(), 5);
    }

    void proxyFilter()
    {
        ShardTreeModel model;
        ShardTreeProxy proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setCheckpoint(smallCheckpoint());
        proxy.setFilterRegularExpression(QRegularExpression(QStringLiteral("gappy")));
        QStringList rows = dump(proxy);
        // Chain, both files, the tensor under each, and its pieces (children of a match stay visible).
        QCOMPARE(rows.size(), 3 + 2 * 3);
        proxy.setFilterRegularExpression(QRegularExpression());
        proxy.setProblemsOnly(true);
        rows = dump(proxy);
        QCOMPARE(rows.filter(QStringLiteral("model.gappy")).size(), 2); // its row under each file
        QVERIFY(rows.filter(QStringLiteral("rank_1.pt")).size() == 1);
        QVERIFY(rows.filter(QStringLiteral("model.w")).size() == 1); // under the problem file
        proxy.setProblemsOnly(false);
        proxy.sort(ShardTreeModel::SizeColumn, Qt::DescendingOrder);
        // Groups sort too: rank_1.pt (72 B) now comes before rank_0.pt (66 B).
        const QModelIndex file0 = proxy.index(1, 0, proxy.mapFromSource(model.checkpointIndex()));
        QCOMPARE(file0.data().toString(), QStringLiteral("rank_0.pt"));
        QCOMPARE(proxy.index(0, 0, file0).data().toString(), QStringLiteral("model.w"));
        QCOMPARE(proxy.index(3, 0, file0).data().toString(), QStringLiteral("model.scale"));
    }

    void emptyAndReset()
    {
        ShardTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model.rowCount(), 0);
        model.setCheckpoint(smallCheckpoint());
        QCOMPARE(model.rowCount(), 1);
        model.setCheckpoint(nullptr);
        QCOMPARE(model.rowCount(), 0);
        QVERIFY(!model.indexForTensor(0).isValid());
    }

    void hundredThousandTensors()
    {
        const auto info = largeCheckpoint(100000, 4);
        ShardTreeModel model;
        ShardTreeProxy proxy;
        proxy.setSourceModel(&model);
        QElapsedTimer timer;
        timer.start();
        model.setCheckpoint(info);
        const qint64 buildMs = timer.elapsed();
        QCOMPARE(model.rowCount(model.checkpointIndex()), 4);
        QCOMPARE(model.rowCount(model.index(3, 0, model.checkpointIndex())), 100000);
        timer.restart();
        proxy.setFilterRegularExpression(QRegularExpression(QStringLiteral("^layers\\.9999\\.")));
        const qint64 filterMs = timer.elapsed();
        const QModelIndex file = proxy.index(0, 0, proxy.mapFromSource(model.checkpointIndex()));
        QCOMPARE(proxy.rowCount(file), 10);
        qInfo("100k tensors × 4 pieces: model %lld ms, filter %lld ms", buildMs, filterMs);
        // Generous bounds for a loaded 2-core CI machine; the real figures are far lower.
        QVERIFY2(buildMs < 3000, qPrintable(QString::number(buildMs)));
        model.setGroupBy(ShardTreeModel::GroupBy::Tensor);
        QCOMPARE(model.rowCount(model.checkpointIndex()), 100000);
    }

    void realFixture()
    {
        const auto path = tessera::test::fixture("hsdp_qwen2_2x2/global_step_10/actor");
        auto result = tessera::scanCheckpoint(path);
        QVERIFY_RESULT(result);
        ShardTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setCheckpoint(std::make_shared<const tessera::CheckpointInfo>(std::move(result).value()));
        QCOMPARE(model.index(0, 0).data().toString(), QStringLiteral("hsdp_qwen2_2x2"));
        const QModelIndex actor = model.checkpointIndex();
        QCOMPARE(actor.data().toString(), QStringLiteral("actor"));
        QCOMPARE(model.rowCount(actor), 4);
        for (int f = 0; f < 4; ++f) {
            const QModelIndex file = model.index(f, 0, actor);
            QCOMPARE(file.data().toString(), QStringLiteral("model_world_size_4_rank_%1.pt").arg(f));
            QCOMPARE(model.rowCount(file), 51);
        }
        // Ranks 2 and 3 hold the replicas of ranks 0 and 1 (Replicate() over ddp).
        const QModelIndex rank2 = model.index(2, 0, actor);
        QCOMPARE(model.index(0, ShardTreeModel::PlacementColumn, rank2).data().toString(), QStringLiteral("[0:256, 0:64] · replica"));
    }

    void mergedModelSaysWhereEachTensorCameFrom()
    {
        const std::string out = tessera::test::makeTempDir() + "/merged";
        QCOMPARE(tessera::test::runTessera(tessera::test::A({ "merge", "--local_dir",
                                                             tessera::test::fixture("megatron_legacy_qwen2_tp2_pp2/global_step_10/actor"),
                                                             "--target_dir", out, "--save_intermediate", "--quiet" })),
                 0);
        auto result = tessera::scanCheckpoint(out);
        QVERIFY_RESULT(result);
        const auto checkpoint = std::make_shared<const tessera::CheckpointInfo>(std::move(result).value());
        ShardTreeModel model;
        model.setCheckpoint(checkpoint);
        for (std::size_t i = 0; i < checkpoint->tensors.size(); ++i)
            if (checkpoint->tensors[i].name == "model.layers.0.self_attn.q_proj.weight") {
                const QString tip = model.indexForTensor(int(i)).data(Qt::ToolTipRole).toString();
                QVERIFY2(tip.contains(QStringLiteral("merged from decoder.layers.0.self_attention.linear_qkv.weight "
                                                     "(rule qkv_weight")),
                         qPrintable(tip));
                QVERIFY(tip.contains(QStringLiteral("CRC-32 ")));
                return;
            }
        QFAIL("no q_proj in the merged model");
    }

    void loraFactorsAndTheirWeightsSayWhatTheyAre()
    {
        auto result = tessera::scanCheckpoint(tessera::test::fixture("lora_llama_w2_fp32/global_step_10/actor"));
        QVERIFY_RESULT(result);
        const auto checkpoint = std::make_shared<const tessera::CheckpointInfo>(std::move(result).value());
        ShardTreeModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setCheckpoint(checkpoint);
        auto tip = [&](const std::string& name) {
            for (std::size_t i = 0; i < checkpoint->tensors.size(); ++i)
                if (checkpoint->tensors[i].name == name)
                    return model.indexForTensor(int(i)).data(Qt::ToolTipRole).toString();
            return QString();
        };
        const std::string q = "base_model.model.model.layers.0.self_attn.q_proj.";
        QVERIFY2(tip(q + "base_layer.weight").contains(QStringLiteral("LoRA-adapted (r 8, scale 2)")),
                 qPrintable(tip(q + "base_layer.weight")));
        QVERIFY(tip(q + "lora_A.default.weight").contains(QStringLiteral("LoRA A of model.layers.0.self_attn.q_proj")));
        QVERIFY(tip(q + "lora_B.default.weight").contains(QStringLiteral("fused into model.layers.0.self_attn.q_proj.weight")));
        QVERIFY(!tip("base_model.model.model.norm.weight").contains(QStringLiteral("LoRA")));
    }
};

QTEST_MAIN(TestShardTreeModel)
#include "tst_shardtreemodel.moc"
