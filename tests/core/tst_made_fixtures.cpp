// SPDX-License-Identifier: GPL-3.0-or-later
// Layouts the shared fixtures lack, from real PyTorch checkpoints in tests/fixtures: ShardedTensor values,
// uneven FSDP2 shards on 3 ranks, and FSDP2 over tensor parallel (_StridedShard, Shard(1), sub-mesh replicas).
// Each must scan without problems and merge bit for bit to its reference.

#include "testutil.h"

#include "model/checkpoint_report.h"
#include "formats/safetensors_reader.h"
#include "formats/scan.h"

#include <QTest>

#include <filesystem>

using namespace tessera;
namespace fs = std::filesystem;

namespace {
std::string madeFixture(const std::string& relative) { return std::string(TESSERA_TEST_DATA_DIR) + "/" + relative; }

std::string signature(const CheckpointInfo& info)
{
    std::map<std::string, std::string> sorted;
    for (const auto& t : info.tensors)
        sorted[t.name] = dtypeLabel(t.dtype) + " " + shapeToString(t.shape);
    std::string out;
    for (const auto& [name, sig] : sorted)
        out += name + " | " + sig + "\n";
    return out;
}
} // namespace

class TestMadeFixtures : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void mergesBitExact_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("source");
        QTest::addColumn<QString>("placement");
        QTest::newRow("sharded tensor") << "fsdp1_llama_w2_sharded_tensor" << "global_step_10/actor" << "ShardedTensor";
        QTest::newRow("uneven w3") << "fsdp2_qwen2_w3_uneven" << "global_step_10/actor" << "Shard(0)";
        QTest::newRow("uneven w3 dcp") << "fsdp2_qwen2_w3_uneven" << "dcp" << "";
        QTest::newRow("tp+fsdp") << "tp_fsdp_llama_2x2" << "global_step_10/actor" << "_StridedShard";
        QTest::newRow("tp+fsdp dcp") << "tp_fsdp_llama_2x2" << "dcp" << "";
        QTest::newRow("tied embeddings") << "fsdp2_qwen2tied_w2" << "global_step_10/actor" << "";
        QTest::newRow("tied embeddings dcp") << "fsdp2_qwen2tied_w2" << "dcp" << "";
        QTest::newRow("critic value head") << "fsdp2_qwen2_critic_w2" << "global_step_10/actor" << "";
        QTest::newRow("critic value head dcp") << "fsdp2_qwen2_critic_w2" << "dcp" << "";
        QTest::newRow("megatron-lm vpp") << "megatron_lm_llama_tp2_pp2_vpp2" << "" << "";
        QTest::newRow("megatron legacy pp4") << "megatron_legacy_llama_tp1_pp4" << "" << "";
        QTest::newRow("megatron dist tp2") << "megatron_dist_qwen2_tp2_pp1" << "" << "";
    }

    void mergesBitExact()
    {
        QFETCH(QString, fixture);
        QFETCH(QString, source);
        QFETCH(QString, placement);
        const std::string base = madeFixture(fixture.toStdString());
        const bool megatron = fixture.startsWith(QStringLiteral("megatron"));
        const std::string checkpoint = source.isEmpty() ? base : base + "/" + source.toStdString();

        auto info = scanCheckpoint(checkpoint, megatron ? ScanOptions() : ScanOptions { base + "/global_step_10/actor/huggingface", 0 });
        QVERIFY_RESULT(info);
        for (const auto& p : info->problems)
            qWarning("%s", p.text().c_str());
        QVERIFY(info->problems.empty());
        QVERIFY2(!info->hfConfigDir.empty(), "the config folder is found without --hf_model_path");
        const std::string config = info->hfConfigDir;
        if (!megatron) { // Megatron names differ from Hugging Face's until mapped
            auto reference = scanSafetensorsFolder(base + "/reference");
            QVERIFY_RESULT(reference);
            QCOMPARE(QString::fromStdString(signature(*info)), QString::fromStdString(signature(*reference)));
        }
        if (!placement.isEmpty()) {
            bool seen = false;
            for (const auto& t : info->tensors)
                seen |= QString::fromStdString(t.placement).contains(placement);
            QVERIFY2(seen, qPrintable(QStringLiteral("no tensor with a %1 placement").arg(placement)));
        }

        const std::string out = test::makeTempDir() + "/merged";
        QString stdoutText, stderrText;
        const int code = test::runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"),
                                            QString::fromStdString(checkpoint), QStringLiteral("--target_dir"),
                                            QString::fromStdString(out), QStringLiteral("--hf_model_path"),
                                            QString::fromStdString(config), QStringLiteral("--quiet") },
                                          &stdoutText, &stderrText);
        QVERIFY2(code == 0, qPrintable(stderrText));
        QVERIFY(test::readFile(out + "/model.safetensors") == test::readFile(base + "/reference/model.safetensors"));
        QVERIFY(test::readFile(out + "/config.json") == test::readFile(config + "/config.json"));
    }

    void subMeshReplicasAreNotOverlaps()
    {
        // Norms live on the "dp" sub-mesh: ranks 0 and 1 (tp 0 and 1) hold the same rows.
        auto info = scanCheckpoint(madeFixture("tp_fsdp_llama_2x2/global_step_10/actor"));
        QVERIFY_RESULT(info);
        const auto* norm = info->find("model.norm.weight");
        QVERIFY(norm);
        int primary = 0, replica = 0;
        for (const auto& p : norm->pieces)
            (p.role == PieceRole::Primary ? primary : replica)++;
        QCOMPARE(primary, 2);
        QCOMPARE(replica, 2);
    }
};

QTEST_GUILESS_MAIN(TestMadeFixtures)
#include "tst_made_fixtures.moc"
