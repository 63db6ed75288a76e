// SPDX-License-Identifier: GPL-3.0-or-later
// Scanning the shared fixtures: every layout detected, every tensor reported with the reference's name, dtype
// and global shape, and `tessera inspect` behaving as documented.

#include "testutil.h"

#include "model/checkpoint_report.h"
#include "formats/safetensors_reader.h"
#include "formats/scan.h"

#include <nlohmann/json.hpp>

#include <QTest>

#include <filesystem>
#include <map>

using namespace tessera;
namespace fs = std::filesystem;

namespace {
/// name → "DTYPE [shape]" for a scanned checkpoint or a reference file.
std::map<std::string, std::string> signature(const CheckpointInfo& info)
{
    std::map<std::string, std::string> out;
    for (const auto& t : info.tensors)
        out[t.name] = dtypeLabel(t.dtype) + " " + shapeToString(t.shape);
    return out;
}

std::string dump(const std::map<std::string, std::string>& sig)
{
    std::string s;
    for (const auto& [name, value] : sig)
        s += name + " | " + value + "\n";
    return s;
}

void addCases()
{
    QTest::addColumn<QString>("checkpoint");
    QTest::addColumn<QString>("reference");
    QTest::addColumn<QString>("layout");
    for (const char* c : { "fsdp2_llama_w4", "fsdp2_qwen2_w2_fp32", "fsdp1_llama_w2_dtensor", "hsdp_qwen2_2x2" }) {
        const QString base = QString::fromLatin1(c);
        QTest::newRow(c) << base + QStringLiteral("/global_step_10/actor") << base + QStringLiteral("/reference")
                         << QStringLiteral("verl-fsdp");
        if (fs::exists(test::fixture(std::string(c) + "/dcp")))
            QTest::newRow((std::string(c) + "/dcp").c_str())
                << base + QStringLiteral("/dcp") << base + QStringLiteral("/reference") << QStringLiteral("dcp");
    }
}
} // namespace

class TestInspect : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void aProblemNamesItsFileOnce()
    {
        // Readers' errors often start with the path already; the problem line must not repeat it.
        const tessera::Problem p { "/a/rank_1.pt", "", "/a/rank_1.pt: not a torch.save archive" };
        QCOMPARE(p.text(), std::string("/a/rank_1.pt: not a torch.save archive"));
        const tessera::Problem q { "/a/rank_1.pt", "w", "w: holds a DTensor" };
        QCOMPARE(q.text(), std::string("/a/rank_1.pt: w: holds a DTensor"));
        const tessera::Problem r { "/a/rank_1.pt", "", "rank_1 is short" };
        QCOMPARE(r.text(), std::string("/a/rank_1.pt: rank_1 is short"));
    }

    void matchesReference_data() { addCases(); }
    void matchesReference()
    {
        QFETCH(QString, checkpoint);
        QFETCH(QString, reference);
        QFETCH(QString, layout);
        auto info = scanCheckpoint(test::fixture(checkpoint.toStdString()));
        QVERIFY_RESULT(info);
        QCOMPARE(QString::fromStdString(info->layout), layout);
        for (const auto& p : info->problems)
            qWarning("%s", p.text().c_str());
        QVERIFY(info->problems.empty());
        auto ref = scanSafetensorsFolder(test::fixture(reference.toStdString()));
        QVERIFY_RESULT(ref);
        QCOMPARE(QString::fromStdString(dump(signature(*info))), QString::fromStdString(dump(signature(*ref))));
    }

    void detectsFromRunRoot()
    {
        // The run root follows latest_checkpointed_iteration.txt to global_step_10/actor.
        auto info = scanCheckpoint(test::fixture("fsdp2_llama_w4"));
        QVERIFY_RESULT(info);
        QCOMPARE(QString::fromStdString(info->layout), QStringLiteral("verl-fsdp"));
        QVERIFY(QString::fromStdString(info->hfConfigDir).endsWith(QStringLiteral("actor/huggingface")));
        QCOMPARE(info->parallel.worldSize, 4);
        QCOMPARE(info->parallel.meshes.size(), std::size_t(1));
    }

    void hsdpUsesOneReplicaGroup()
    {
        auto info = scanCheckpoint(test::fixture("hsdp_qwen2_2x2/global_step_10/actor"));
        QVERIFY_RESULT(info);
        const auto* embed = info->find("model.embed_tokens.weight");
        QVERIFY(embed);
        int primary = 0, replica = 0;
        for (const auto& p : embed->pieces)
            (p.role == PieceRole::Primary ? primary : replica)++;
        QCOMPARE(primary, 2);
        QCOMPARE(replica, 2);
    }

    void loraKeepsPeftNames()
    {
        auto info = scanCheckpoint(test::fixture("lora_llama_w2_fp32/global_step_10/actor"));
        QVERIFY_RESULT(info);
        QVERIFY(info->problems.empty());
        QVERIFY(info->find("base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"));
        QVERIFY(info->find("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight"));
    }

    void missingRankIsAProblem()
    {
        const std::string dir = test::makeTempDir();
        const fs::path src = test::fixture("fsdp2_llama_w4/global_step_10/actor");
        for (const auto& entry : fs::directory_iterator(src))
            if (entry.path().filename() != "model_world_size_4_rank_2.pt" && entry.is_regular_file())
                fs::copy_file(entry.path(), fs::path(dir) / entry.path().filename());
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY(!info->problems.empty());
        QVERIFY(QString::fromStdString(info->problems.front().text()).contains(QStringLiteral("rank_2.pt")));
    }

    void damagedRankFileIsAProblemNamingIt()
    {
        const std::string dir = test::makeTempDir();
        const fs::path src = test::fixture("fsdp2_llama_w4/global_step_10/actor");
        for (const auto& entry : fs::directory_iterator(src))
            if (entry.is_regular_file())
                fs::copy_file(entry.path(), fs::path(dir) / entry.path().filename());
        const std::string victim = dir + "/model_world_size_4_rank_1.pt";
        std::string bytes = test::readFile(victim);
        bytes.resize(bytes.size() / 3);
        test::writeFile(victim, bytes);
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        bool named = false;
        for (const auto& p : info->problems)
            named |= p.file == victim;
        QVERIFY(named);
    }

    void unknownFolderIsAnError()
    {
        auto info = scanCheckpoint(test::makeTempDir());
        QVERIFY(!info);
        QVERIFY(QString::fromStdString(info.error().message).contains(QStringLiteral("no checkpoint found")));
    }

    void cliJson()
    {
        QString out, err;
        const int code = test::runTessera(
            { QStringLiteral("inspect"), QStringLiteral("--json"),
              QString::fromStdString(test::fixture("fsdp2_llama_w4/dcp")), QStringLiteral("--hf-model-path"),
              QString::fromStdString(test::fixture("fsdp2_llama_w4/global_step_10/actor/huggingface")) },
            &out, &err);
        QCOMPARE(code, 0);
        auto j = nlohmann::json::parse(out.toStdString(), nullptr, false);
        QVERIFY(!j.is_discarded());
        QCOMPARE(QString::fromStdString(j["format"].get<std::string>()), QStringLiteral("dcp"));
        QVERIFY(j["problems"].empty());
        QCOMPARE(j["tensors"].size(), std::size_t(39));
        const auto& first = j["tensors"][0];
        QVERIFY(first.contains("name") && first.contains("dtype") && first.contains("shape") && first.contains("pieces"));
        QVERIFY(first["pieces"][0].contains("offsets"));
    }

    void cliExitCodes()
    {
        QCOMPARE(test::runTessera({ QStringLiteral("inspect") }), 2);
        QCOMPARE(test::runTessera({ QStringLiteral("inspect"), QStringLiteral("--bogus"), QStringLiteral("x") }), 2);
        QCOMPARE(test::runTessera({ QStringLiteral("inspect"), QString::fromStdString(test::makeTempDir()) }), 1);
        QString out;
        QCOMPARE(test::runTessera({ QStringLiteral("inspect"), QStringLiteral("--help") }, &out), 0);
        QVERIFY(out.contains(QStringLiteral("usage: ") + test::programName() + QStringLiteral(" inspect")));
    }
};

QTEST_GUILESS_MAIN(TestInspect)
#include "tst_inspect.moc"
