// SPDX-License-Identifier: GPL-3.0-or-later
// tessera split: Hugging Face models and checkpoints written as FSDP2 rank files and DCP folders. The proof is
// the round trip (split, then merge, gives the model back bit for bit) and, where the shared fixtures hold real
// FSDP2 files of the same layout, the same files tensor for tensor.

#include "testutil.h"

#include "formats/scan.h"
#include "io/mapped_file.h"
#include "model/module_order.h"

#include <QTest>

#include <filesystem>
#include <set>

using namespace tessera;
using test::A;

namespace fs = std::filesystem;

namespace {

/// Runs `tessera split` and fails the test (with its stderr) unless it succeeds.
void split(const QStringList& args)
{
    QString out, err;
    const int code = test::runTessera(QStringList { QStringLiteral("split") } + args + A({ "--quiet" }), &out, &err);
    if (code != 0)
        QFAIL(qPrintable(QStringLiteral("split %1 failed: %2").arg(args.join(QLatin1Char(' ')), err)));
}

/// Merges `checkpoint` and checks the result is `reference`'s model.safetensors byte for byte.
void mergesBackTo(const std::string& checkpoint, const std::string& referenceDir)
{
    const std::string merged = test::makeTempDir() + "/merged";
    QString out, err;
    QCOMPARE(test::runTessera(A({ "merge", "--local_dir", checkpoint, "--target_dir", merged, "--quiet" }), &out, &err), 0);
    QVERIFY2(test::readFile(merged + "/model.safetensors") == test::readFile(referenceDir + "/model.safetensors"),
             qPrintable(QString::fromStdString(checkpoint + " does not merge back to " + referenceDir)));
}

std::string pieceBytes(const Piece& p, std::uint64_t bytes)
{
    auto map = MappedFile::open(p.file);
    if (!map)
        return "<unreadable>";
    return std::string(reinterpret_cast<const char*>((*map)->view().data() + p.dataOffset), bytes);
}

/// Two checkpoints hold the same tensors in the same key order, laid out the same way: placements, meshes,
/// every rank's box, storage size and bytes.
void sameCheckpoint(const std::string& ours, const std::string& real)
{
    auto a = scanCheckpoint(ours);
    auto b = scanCheckpoint(real);
    QVERIFY_RESULT(a);
    QVERIFY_RESULT(b);
    QCOMPARE(a->layout, b->layout);
    QCOMPARE(a->parallel.worldSize, b->parallel.worldSize);
    QVERIFY(a->parallel.meshes == b->parallel.meshes);
    QCOMPARE(a->tensors.size(), b->tensors.size());
    for (std::size_t i = 0; i < a->tensors.size(); ++i) {
        const TensorInfo& x = a->tensors[i];
        const TensorInfo& y = b->tensors[i];
        QCOMPARE(x.name, y.name);
        QVERIFY(x.dtype == y.dtype);
        QVERIFY(x.shape == y.shape);
        QCOMPARE(x.placement, y.placement);
        QCOMPARE(x.pieces.size(), y.pieces.size());
        for (std::size_t k = 0; k < x.pieces.size(); ++k) {
            const Piece& p = x.pieces[k];
            const Piece& q = y.pieces[k];
            QVERIFY2(p.rank == q.rank && p.role == q.role && p.offsets == q.offsets && p.shape == q.shape
                         && p.storageBytes == q.storageBytes,
                     qPrintable(QString::fromStdString(x.name + " piece " + std::to_string(k))));
            std::uint64_t n = dtypeSize(p.storedDtype);
            for (auto s : p.shape)
                n *= static_cast<std::uint64_t>(s);
            QVERIFY2(pieceBytes(p, n) == pieceBytes(q, n), qPrintable(QString::fromStdString(x.name)));
        }
    }
}

} // namespace

class TestSplit : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void fsdpMatchesRealFsdp2Files_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("sizes");
        QTest::newRow("llama w4") << "fsdp2_llama_w4" << "--world_size=4";
        QTest::newRow("qwen2 w2 fp32, biases") << "fsdp2_qwen2_w2_fp32" << "--world_size=2";
        QTest::newRow("hsdp 2x2") << "hsdp_qwen2_2x2" << "--mesh=2x2";
        QTest::newRow("gguf llama w2") << "gguf_llama_w2_fp32" << "--world_size=2";
    }
    void fsdpMatchesRealFsdp2Files()
    {
        QFETCH(QString, fixture);
        QFETCH(QString, sizes);
        const std::string name = fixture.toStdString();
        const std::string run = test::makeTempDir() + "/run";
        const std::string actor = run + "/global_step_10/actor";
        split(A({ "--hf_dir", test::fixture(name + "/reference"), "--target_dir", actor, sizes }));
        sameCheckpoint(actor, test::fixture(name + "/global_step_10/actor"));
        QCOMPARE(test::readFile(actor + "/fsdp_config.json"),
                 test::readFile(test::fixture(name + "/global_step_10/actor/fsdp_config.json")));
        QCOMPARE(test::readFile(run + "/latest_checkpointed_iteration.txt"), std::string("10"));
        QVERIFY(fs::exists(actor + "/huggingface/config.json"));
        mergesBackTo(actor, test::fixture(name + "/reference"));
    }

    void roundTripsForEverySize_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("format");
        QTest::addColumn<QString>("sizes");
        for (const char* f : { "fsdp2_llama_w4", "fsdp2_qwen2_w2_fp32", "megatron_legacy_qwen2_tp2_pp2" }) {
            for (const char* w : { "1", "2", "3", "4", "8" }) {
                QTest::addRow("%s fsdp world %s", f, w) << f << "fsdp" << QStringLiteral("--world_size=%1").arg(QLatin1String(w));
                QTest::addRow("%s dcp world %s", f, w) << f << "dcp" << QStringLiteral("--world_size=%1").arg(QLatin1String(w));
            }
            QTest::addRow("%s hsdp 2x3", f) << f << "fsdp" << "--mesh=2x3";
            QTest::addRow("%s 3-D mesh", f) << f << "fsdp" << "--mesh=2x1x2 --mesh_dim_names=a,b,c";
        }
    }
    void roundTripsForEverySize()
    {
        QFETCH(QString, fixture);
        QFETCH(QString, format);
        QFETCH(QString, sizes);
        const std::string reference = test::fixture(fixture.toStdString() + "/reference");
        const std::string target = test::makeTempDir() + "/out";
        split(QStringList { QStringLiteral("--hf_dir"), QString::fromStdString(reference), QStringLiteral("--target_dir"),
                            QString::fromStdString(target), QStringLiteral("--format"), format }
              + sizes.split(QLatin1Char(' ')));
        mergesBackTo(target, reference);
    }

    void reshardsAnyCheckpoint_data()
    {
        QTest::addColumn<QString>("source");
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("format");
        QTest::addColumn<QString>("sizes");
        QTest::newRow("Megatron TP2 PP2 -> FSDP2 world 8")
            << "megatron_legacy_qwen2_tp2_pp2/global_step_10/actor" << "megatron_legacy_qwen2_tp2_pp2" << "fsdp" << "--world_size=8";
        QTest::newRow("FSDP2 world 4 -> world 3 (uneven)")
            << "fsdp2_llama_w4/global_step_10/actor" << "fsdp2_llama_w4" << "fsdp" << "--world_size=3";
        QTest::newRow("HSDP DCP -> FSDP2 mesh 2x3") << "hsdp_qwen2_2x2/dcp" << "hsdp_qwen2_2x2" << "fsdp" << "--mesh=2x3";
        QTest::newRow("torch_dist TP2 PP2 -> DCP 5 ranks")
            << "megatron_dist_llama_tp2_pp2/global_step_10/actor" << "megatron_dist_llama_tp2_pp2" << "dcp" << "--world_size=5";
        QTest::newRow("FSDP1 DTensor -> DCP 3 ranks")
            << "fsdp1_llama_w2_dtensor/global_step_10/actor" << "fsdp1_llama_w2_dtensor" << "dcp" << "--world_size=3";
    }
    void reshardsAnyCheckpoint()
    {
        QFETCH(QString, source);
        QFETCH(QString, fixture);
        QFETCH(QString, format);
        QFETCH(QString, sizes);
        const std::string target = test::makeTempDir() + "/out";
        split(A({ "--local_dir", test::fixture(source.toStdString()), "--target_dir", target, "--format", format, sizes }));
        mergesBackTo(target, test::fixture(fixture.toStdString() + "/reference"));
    }

    void reshardedSplitReshardsAgain()
    {
        // FSDP world 4 -> DCP 3 -> FSDP HSDP 2x2: still the same model.
        const std::string dcp = test::makeTempDir() + "/dcp";
        const std::string fsdp = test::makeTempDir() + "/fsdp";
        split(A({ "--local_dir", test::fixture("fsdp2_llama_w4/global_step_10/actor"), "--target_dir", dcp, "--format",
                  "dcp", "--world_size", "3" }));
        split(A({ "--local_dir", dcp, "--target_dir", fsdp, "--mesh", "2x2" }));
        mergesBackTo(fsdp, test::fixture("fsdp2_llama_w4/reference"));
    }

    void dtypeConversionIsTheMergesOwn()
    {
        // --dtype converts on the way, exactly as merge --dtype does.
        const std::string target = test::makeTempDir() + "/out";
        split(A({ "--hf_dir", test::fixture("fsdp2_qwen2_w2_fp32/reference"), "--target_dir", target, "--world_size",
                  "2", "--dtype", "bf16" }));
        const std::string viaSplit = test::makeTempDir() + "/a";
        const std::string direct = test::makeTempDir() + "/b";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", target, "--target_dir", viaSplit, "--quiet" })), 0);
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", test::fixture("fsdp2_qwen2_w2_fp32/reference"), "--target_dir",
                                      direct, "--dtype", "bf16", "--quiet" })),
                 0);
        QCOMPARE(test::readFile(viaSplit + "/model.safetensors"), test::readFile(direct + "/model.safetensors"));
        QVERIFY(test::readFile(target + "/huggingface/config.json").find("\"bfloat16\"") != std::string::npos);
    }

    void dryRunPlansWithoutWriting()
    {
        const std::string target = test::makeTempDir() + "/out";
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", test::fixture("fsdp2_llama_w4/reference"), "--target_dir", target,
                                      "--world_size", "3", "--dry-run", "--json" }),
                                  &out, &err),
                 0);
        QVERIFY(!fs::exists(target));
        const QString files = out.section(QStringLiteral("\"files\""), 1);
        QVERIFY(out.contains(QStringLiteral("\"model_world_size_3_rank_2.pt\"")));
        QVERIFY(out.contains(QStringLiteral("\"memory_bytes\"")));
        QVERIFY(out.contains(QStringLiteral("\"storage_bytes\"")));
        QVERIFY(!files.isEmpty());
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", test::fixture("fsdp2_llama_w4/reference"), "--target_dir", target,
                                      "--format", "dcp", "--world_size", "2", "--dry-run", "--tensors" }),
                                  &out, &err),
                 0);
        QVERIFY(out.contains(QStringLiteral("__1_0.distcp")));
        QVERIFY(out.contains(QStringLiteral("model.layers.0.self_attn.q_proj.weight")));
    }

    void refusesAnExistingCheckpointAndLeavesItAlone()
    {
        const std::string target = test::makeTempDir() + "/out";
        split(A({ "--hf_dir", test::fixture("fsdp2_llama_w4/reference"), "--target_dir", target, "--world_size", "2" }));
        const std::string before = test::readFile(target + "/model_world_size_2_rank_0.pt");
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", test::fixture("fsdp2_llama_w4/reference"), "--target_dir",
                                      target, "--world_size", "4" }),
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("already holds a checkpoint")), qPrintable(err));
        QCOMPARE(test::readFile(target + "/model_world_size_2_rank_0.pt"), before);
        QVERIFY(!fs::exists(target + "/model_world_size_4_rank_0.pt"));
    }

    void badSizesAreClearErrors_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("no size") << A({}) << "--world_size";
        QTest::newRow("zero ranks") << A({ "--world_size", "0" }) << "positive";
        QTest::newRow("mesh and world disagree") << A({ "--world_size", "4", "--mesh", "2x3" }) << "does not match";
        QTest::newRow("bad mesh") << A({ "--mesh", "2xa" }) << "--mesh";
        QTest::newRow("names for another mesh") << A({ "--mesh", "2x2", "--mesh_dim_names", "fsdp" }) << "--mesh_dim_names";
        QTest::newRow("dcp on a 2-D mesh") << A({ "--format", "dcp", "--mesh", "2x2" }) << "one mesh dim";
        QTest::newRow("unknown format") << A({ "--format", "gguf", "--world_size", "2" }) << "--format";
    }
    void badSizesAreClearErrors()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        const std::string target = test::makeTempDir() + "/out";
        QString out, err;
        const int code = test::runTessera(A({ "split", "--hf_dir", test::fixture("fsdp2_llama_w4/reference"),
                                              "--target_dir", target })
                                              + args,
                                          &out, &err);
        QVERIFY(code != 0);
        QVERIFY2(err.contains(message), qPrintable(err));
        QVERIFY(!fs::exists(target));
    }

    void sourceMustBeWhatTheFlagSays()
    {
        QString out, err;
        const std::string target = test::makeTempDir() + "/out";
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", test::fixture("fsdp2_llama_w4/global_step_10/actor"),
                                      "--target_dir", target, "--world_size", "2" }),
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("--local_dir")), qPrintable(err));
        QCOMPARE(test::runTessera(A({ "split", "--target_dir", target, "--world_size", "2" }), &out, &err), 2);
        QVERIFY(err.contains(QStringLiteral("--hf_dir")));
        QCOMPARE(test::runTessera(A({ "split", "--help" }), &out, &err), 0);
        QVERIFY(out.contains(QStringLiteral("--format")) && out.contains(QStringLiteral("--mesh")));
    }

    void moduleOrderIsTransformersOrder()
    {
        const std::vector<std::string> names { "lm_head.weight",
                                               "model.embed_tokens.weight",
                                               "model.layers.0.input_layernorm.weight",
                                               "model.layers.0.mlp.down_proj.weight",
                                               "model.layers.0.mlp.gate_proj.weight",
                                               "model.layers.0.self_attn.k_proj.bias",
                                               "model.layers.0.self_attn.k_proj.weight",
                                               "model.layers.0.self_attn.q_proj.weight",
                                               "model.layers.10.self_attn.q_proj.weight",
                                               "model.layers.2.self_attn.q_proj.weight",
                                               "model.norm.weight" };
        std::vector<std::string> ordered;
        for (auto i : moduleOrder(names))
            ordered.push_back(names[i]);
        const std::vector<std::string> expected { "model.embed_tokens.weight",
                                                  "model.layers.0.self_attn.q_proj.weight",
                                                  "model.layers.0.self_attn.k_proj.weight",
                                                  "model.layers.0.self_attn.k_proj.bias",
                                                  "model.layers.0.mlp.gate_proj.weight",
                                                  "model.layers.0.mlp.down_proj.weight",
                                                  "model.layers.0.input_layernorm.weight",
                                                  "model.layers.2.self_attn.q_proj.weight",
                                                  "model.layers.10.self_attn.q_proj.weight",
                                                  "model.norm.weight",
                                                  "lm_head.weight" };
        QVERIFY(ordered == expected);
    }
};

QTEST_GUILESS_MAIN(TestSplit)
#include "tst_split.moc"
