// SPDX-License-Identifier: GPL-3.0-or-later
// tessera split: Hugging Face models and checkpoints written as FSDP2 rank files and DCP folders. The proof is
// the round trip (split, then merge, gives the model back bit for bit) and, where the shared fixtures hold real
// FSDP2 files of the same layout, the same files tensor for tensor.

#include "testutil.h"
#include "hfmodels.h"

#include "formats/safetensors_writer.h"
#include "formats/scan.h"
#include "io/mapped_file.h"
#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping_rules.h"
#include "merge/merge_plan.h"
#include "model/module_order.h"
#include "split/split_engine.h"
#include "split/split_plan.h"

#include <QTest>

#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

using namespace tessera;
using test::A;
using test::writeHfModel;

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

/// Two checkpoints hold the same tensors (in the same key order when `sameOrder`), laid out the same way:
/// placements, meshes, every rank's box, storage size and bytes.
void sameCheckpoint(const std::string& ours, const std::string& real, bool sameOrder = true)
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
        const TensorInfo* found = sameOrder ? &b->tensors[i] : b->find(x.name);
        QVERIFY2(found, qPrintable(QString::fromStdString(x.name + " is not in " + real)));
        const TensorInfo& y = *found;
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

const char* const kQwen2MoeConfig = R"({
  "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 32,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "num_hidden_layers": 4,
  "intermediate_size": 64, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 32, "num_experts": 4,
  "num_experts_per_tok": 2, "vocab_size": 100, "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

const char* const kTiedQwen2Config = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 32, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 8, "num_hidden_layers": 4, "intermediate_size": 48, "vocab_size": 100,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16"
})";

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

    void olderStepLeavesTheNewestNamed()
    {
        const std::string run = test::makeTempDir() + "/run";
        fs::create_directories(run);
        test::writeFile(run + "/latest_checkpointed_iteration.txt", "20");
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", test::fixture("fsdp2_llama_w4/reference"), "--target_dir",
                                      run + "/global_step_10/actor/", "--world_size", "2" }),
                                  &out, &err),
                 0);
        QCOMPARE(test::readFile(run + "/latest_checkpointed_iteration.txt"), std::string("20"));
        QVERIFY2(err.contains(QStringLiteral("left as it is")), qPrintable(err));
        QVERIFY(fs::exists(run + "/global_step_10/actor/model_world_size_2_rank_1.pt"));
    }

    void roundTripsForEverySize_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("format");
        QTest::addColumn<QString>("sizes");
        for (const char* f : { "fsdp2_llama_w4", "fsdp2_qwen2_w2_fp32", "megatron_legacy_qwen2_tp2_pp2" }) {
            for (const char* w : { "1", "2", "3", "4", "8" }) {
                // Sampled (sanitizers): the uneven world of 3 and the one with empty shards, 8.
                if (test::sampled() && std::string(w) != "3" && std::string(w) != "8")
                    continue;
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

    void everyFixtureSplitsToEveryFormat_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QStringList>("layout");
        const char* fixtures[] = { "fsdp2_llama_w4", "fsdp2_qwen2_w2_fp32", "fsdp1_llama_w2_dtensor", "hsdp_qwen2_2x2",
                                   "gguf_llama_w2_fp32", "lora_llama_w2_fp32", "megatron_legacy_qwen2_tp2_pp2",
                                   "megatron_dist_llama_tp2_pp2" };
        const std::pair<const char*, QStringList> layouts[] = {
            { "fsdp", A({ "--format", "fsdp", "--world_size", "2" }) },
            { "dcp", A({ "--format", "dcp", "--world_size", "3" }) },
            { "megatron", A({ "--format", "megatron", "--tp", "2", "--pp", "2" }) },
            { "megatron-lm", A({ "--format", "megatron", "--flavor", "megatron-lm", "--tp", "2" }) },
            { "megatron-dist", A({ "--format", "megatron-dist", "--tp", "2", "--pp", "2" }) },
        };
        std::size_t row = 0;
        for (const char* f : fixtures)
            for (const auto& [name, layout] : layouts)
                // Sampled (sanitizers): every other row, which still takes each fixture and each layout.
                if (!test::sampled() || row++ % 2 == 0)
                    QTest::addRow("%s %s", f, name) << f << layout;
    }
    void everyFixtureSplitsToEveryFormat()
    {
        QFETCH(QString, fixture);
        QFETCH(QStringList, layout);
        const std::string reference = test::fixture(fixture.toStdString() + "/reference");
        const std::string target = test::makeTempDir() + "/out";
        split(A({ "--hf_dir", reference, "--target_dir", target }) + layout);
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
        QTest::newRow("FSDP2 world 4 -> Megatron TP2 PP2")
            << "fsdp2_llama_w4/global_step_10/actor" << "fsdp2_llama_w4" << "megatron" << "--tp=2 --pp=2";
        QTest::newRow("Megatron TP2 PP2 -> Megatron TP1 PP2 VPP2") << "megatron_legacy_qwen2_tp2_pp2/global_step_10/actor"
                                                                   << "megatron_legacy_qwen2_tp2_pp2" << "megatron"
                                                                   << "--pp=2 --vpp=2";
        QTest::newRow("torch_dist TP2 PP2 -> Megatron TP2 PP4")
            << "megatron_dist_llama_tp2_pp2/global_step_10/actor" << "megatron_dist_llama_tp2_pp2" << "megatron" << "--tp=2 --pp=4";
    }
    void reshardsAnyCheckpoint()
    {
        QFETCH(QString, source);
        QFETCH(QString, fixture);
        QFETCH(QString, format);
        QFETCH(QString, sizes);
        const std::string target = test::makeTempDir() + "/out";
        split(A({ "--local_dir", test::fixture(source.toStdString()), "--target_dir", target, "--format", format })
              + sizes.split(QLatin1Char(' ')));
        mergesBackTo(target, test::fixture(fixture.toStdString() + "/reference"));
    }

    void megatronMatchesRealMegatronFiles()
    {
        // The fixture was written by torch.save from Megatron-core's per-rank tensors (TP 2, PP 2).
        const std::string run = test::makeTempDir() + "/run";
        const std::string actor = run + "/global_step_10/actor";
        split(A({ "--hf_dir", test::fixture("megatron_legacy_qwen2_tp2_pp2/reference"), "--target_dir", actor, "--format",
                  "megatron", "--tp", "2", "--pp", "2" }));
        // A state dict's key order is the writer's (the fixture's generator has its own), so tensors match by name.
        sameCheckpoint(actor, test::fixture("megatron_legacy_qwen2_tp2_pp2/global_step_10/actor"), false);
        QVERIFY(fs::exists(actor + "/hf_config_and_tokenizer/config.json"));
        QVERIFY(test::readFile(actor + "/transformer_config.json").find("\"tensor_model_parallel_size\": 2") != std::string::npos);
        QCOMPARE(test::readFile(run + "/latest_checkpointed_iteration.txt"), std::string("10"));
        mergesBackTo(actor, test::fixture("megatron_legacy_qwen2_tp2_pp2/reference"));
    }

    void megatronDistMatchesRealTorchDist()
    {
        // The fixture was written by torch.distributed.checkpoint from Megatron-style ShardedTensors (TP 2, PP 2).
        const std::string run = test::makeTempDir() + "/run";
        const std::string actor = run + "/global_step_10/actor";
        split(A({ "--hf_dir", test::fixture("megatron_dist_llama_tp2_pp2/reference"), "--target_dir", actor, "--format",
                  "megatron-dist", "--tp", "2", "--pp", "2" }));
        sameCheckpoint(actor, test::fixture("megatron_dist_llama_tp2_pp2/global_step_10/actor"), false);
        QCOMPARE(test::readFile(actor + "/dist_ckpt/metadata.json"),
                 test::readFile(test::fixture("megatron_dist_llama_tp2_pp2/global_step_10/actor/dist_ckpt/metadata.json")));
        QVERIFY(fs::exists(actor + "/dist_ckpt/common.pt") && fs::exists(actor + "/huggingface/config.json"));
        mergesBackTo(actor, test::fixture("megatron_dist_llama_tp2_pp2/reference"));
        for (const QStringList& sizes : { A({ "--tp", "1" }), A({ "--pp", "4" }), A({ "--tp", "2", "--pp", "4" }) }) {
            const std::string target = test::makeTempDir() + "/actor";
            split(A({ "--hf_dir", test::fixture("megatron_legacy_qwen2_tp2_pp2/reference"), "--target_dir", target,
                      "--format", "megatron-dist" })
                  + sizes);
            mergesBackTo(target, test::fixture("megatron_legacy_qwen2_tp2_pp2/reference"));
        }
    }

    void megatronRoundTripsForEveryLayout_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QStringList>("sizes");
        for (const char* f : { "megatron_legacy_qwen2_tp2_pp2", "fsdp2_llama_w4" }) {
            QTest::addRow("%s tp1", f) << f << A({ "--tp", "1" });
            QTest::addRow("%s tp2", f) << f << A({ "--tp", "2" });
            QTest::addRow("%s pp2", f) << f << A({ "--pp", "2" });
            QTest::addRow("%s pp4", f) << f << A({ "--pp", "4" });
            QTest::addRow("%s tp2 pp2", f) << f << A({ "--tp", "2", "--pp", "2" });
            QTest::addRow("%s tp2 pp2 vpp2", f) << f << A({ "--tp", "2", "--pp", "2", "--vpp", "2" });
            QTest::addRow("%s vocab padded to 64", f) << f << A({ "--tp", "2", "--make_vocab_size_divisible_by", "32" });
        }
    }
    void megatronRoundTripsForEveryLayout()
    {
        QFETCH(QString, fixture);
        QFETCH(QStringList, sizes);
        const std::string reference = test::fixture(fixture.toStdString() + "/reference");
        const std::string target = test::makeTempDir() + "/actor";
        split(A({ "--hf_dir", reference, "--target_dir", target, "--format", "megatron" }) + sizes);
        mergesBackTo(target, reference);
    }

    void megatronLmFlavorCarriesItsArgs()
    {
        // Megatron-LM's own layout: ITER/mp_rank_*/model_optim_rng.pt whose args give the sizes (no
        // transformer_config.json), found through latest_checkpointed_iteration.txt.
        const std::string reference = test::fixture("megatron_legacy_qwen2_tp2_pp2/reference");
        for (const QStringList& extra : { A({ "--iteration", "10", "--vpp", "2", "--pp", "2" }), A({ "--tp", "2" }) }) {
            const std::string target = test::makeTempDir() + "/save";
            split(A({ "--hf_dir", reference, "--target_dir", target, "--format", "megatron", "--flavor", "megatron-lm" })
                  + extra);
            const bool release = !extra.contains(QStringLiteral("--iteration"));
            QCOMPARE(test::readFile(target + "/latest_checkpointed_iteration.txt"), std::string(release ? "release" : "10"));
            QVERIFY(fs::exists(target + (release ? "/release/mp_rank_01/model_optim_rng.pt"
                                                 : "/iter_0000010/mp_rank_00_001/model_optim_rng.pt")));
            QVERIFY(!fs::exists(target + "/transformer_config.json"));
            auto scanned = scanCheckpoint(target);
            QVERIFY_RESULT(scanned);
            QCOMPARE(scanned->layout, std::string("megatron-lm"));
            if (!scanned->problems.empty())
                QFAIL(qPrintable(QString::fromStdString(scanned->problems.front().text())));
            mergesBackTo(target, reference);
        }
    }

    void megatronMixtureOfExpertsPerExpertRank()
    {
        // Qwen2-MoE: routed experts split over EP ranks (renumbered locally), the shared expert and the router on
        // every rank, TP 2 over both.
        const std::string hf = writeHfModel(kQwen2MoeConfig);
        for (const QStringList& sizes : { A({ "--tp", "2", "--ep", "2" }), A({ "--ep", "4", "--pp", "2" }) }) {
            const std::string target = test::makeTempDir() + "/actor";
            split(A({ "--hf_dir", hf, "--target_dir", target, "--format", "megatron" }) + sizes);
            mergesBackTo(target, hf);
        }
        const std::string target = test::makeTempDir() + "/actor";
        split(A({ "--hf_dir", hf, "--target_dir", target, "--format", "megatron", "--tp", "2", "--ep", "2" }));
        QVERIFY(fs::exists(target + "/model/mp_rank_01_001/model.pt"));
        auto scanned = scanCheckpoint(target);
        QVERIFY_RESULT(scanned);
        QVERIFY(scanned->find("decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight"));
        QVERIFY(scanned->find("decoder.layers.0.pre_mlp_layernorm.weight"));
        QVERIFY(!scanned->find("decoder.layers.0.mlp.linear_fc1.layer_norm_weight"));
    }

    void megatronTiedEmbeddingsKeepAHeadOnTheLastStage()
    {
        const std::string hf = writeHfModel(kTiedQwen2Config);
        const std::string target = test::makeTempDir() + "/actor";
        split(A({ "--hf_dir", hf, "--target_dir", target, "--format", "megatron", "--pp", "2" }));
        auto scanned = scanCheckpoint(target);
        QVERIFY_RESULT(scanned);
        QVERIFY(scanned->find("output_layer.weight"));
        mergesBackTo(target, hf);
    }

    void megatronValueHeadStaysOneRow()
    {
        // A critic's score head is Megatron's [1, hidden] output layer, whole on every TP rank.
        const std::string hf = writeHfModel(kTiedQwen2Config, true);
        for (const char* format : { "megatron", "megatron-dist" }) {
            const std::string target = test::makeTempDir() + "/critic";
            split(A({ "--hf_dir", hf, "--target_dir", target, "--format", format, "--tp", "2", "--pp", "2" }));
            auto scanned = scanCheckpoint(target);
            QVERIFY_RESULT(scanned);
            const TensorInfo* head = scanned->find("output_layer.weight");
            QVERIFY(head);
            QVERIFY(head->shape == (Shape { 1, 32 }));
            mergesBackTo(target, hf);
        }
    }

    void megatronRefusesWhatItCannotExpress_data()
    {
        QTest::addColumn<QStringList>("sizes");
        QTest::addColumn<QString>("message");
        QTest::newRow("TP over the KV heads") << A({ "--tp", "4" }) << "key/value heads";
        QTest::newRow("layers over stages") << A({ "--pp", "3" }) << "do not split evenly";
        QTest::newRow("VPP without PP") << A({ "--vpp", "2" }) << "--pp 2 or more";
        QTest::newRow("EP on a dense model") << A({ "--ep", "2" }) << "mixture-of-experts";
        QTest::newRow("world size") << A({ "--world_size", "2" }) << "--tp";
    }
    void megatronRefusesWhatItCannotExpress()
    {
        QFETCH(QStringList, sizes);
        QFETCH(QString, message);
        const std::string target = test::makeTempDir() + "/actor";
        QString out, err;
        QVERIFY(test::runTessera(A({ "split", "--hf_dir", test::fixture("megatron_legacy_qwen2_tp2_pp2/reference"),
                                     "--target_dir", target, "--format", "megatron" })
                                     + sizes,
                                 &out, &err)
                != 0);
        QVERIFY2(err.contains(message), qPrintable(err));
        QVERIFY(!fs::exists(target));
    }

    // A model whose embedding and head have rows past config.json's vocab_size: they are trained values, so a split
    // carries them (FSDP, DCP) or refuses, naming the numbers (Megatron keeps vocab_size rows), never zeroes them.
    void rowsPastTheVocabularyAreKeptOrRefused()
    {
        const std::string hf = test::copyFixtureFolder("fsdp2_llama_w4/reference");
        std::string config = test::readFile(hf + "/config.json");
        const std::string vocab = "\"vocab_size\": 512";
        QVERIFY(config.find(vocab) != std::string::npos);
        config.replace(config.find(vocab), vocab.size(), "\"vocab_size\": 500");
        test::writeFile(hf + "/config.json", config);
        for (const char* format : { "megatron", "megatron-dist" }) {
            const std::string target = test::makeTempDir() + "/actor";
            QString out, err;
            QCOMPARE(test::runTessera(A({ "split", "--hf_dir", hf, "--target_dir", target, "--format", format, "--tp", "2" }),
                                      &out, &err),
                     1);
            QVERIFY2(err.contains(QStringLiteral("model.embed_tokens.weight has 512 rows but config.json's vocab_size is 500"))
                         && err.contains(QStringLiteral("rows 500–511 would be lost")),
                     qPrintable(err));
            QVERIFY(!fs::exists(target));
        }
        for (const char* format : { "fsdp", "dcp" }) {
            const std::string target = test::makeTempDir() + "/actor";
            split(A({ "--hf_dir", hf, "--target_dir", target, "--format", format, "--world_size", "2" }));
            mergesBackTo(target, hf);
        }
    }

    void brokenSourceIsAnErrorAndWritesNothing()
    {
        // A model file cut short: the split stops with a message naming it, and the target is not created.
        const std::string hf = test::copyFixtureFolder("fsdp2_llama_w4/reference");
        const std::string file = hf + "/model.safetensors";
        fs::resize_file(file, fs::file_size(file) / 2);
        const std::string target = test::makeTempDir() + "/out";
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", hf, "--target_dir", target, "--world_size", "2" }), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("model.safetensors")), qPrintable(err));
        QVERIFY(!fs::exists(target));
    }

    void canceledSplitLeavesNothing()
    {
        auto info = scanCheckpoint(test::fixture("fsdp2_llama_w4/global_step_10/actor"));
        QVERIFY_RESULT(info);
        auto model = planMerge(*info, {});
        QVERIFY_RESULT(model);
        SplitOptions options;
        options.worldSize = 3;
        auto plan = planSplit(*model, options);
        QVERIFY_RESULT(plan);
        // Cancel as soon as the first bytes are written.
        struct CancelAtFirstReport : Progress {
            mutable bool canceled = false;
            void report(std::uint64_t, std::uint64_t, const std::string&) override { canceled = true; }
            bool isCanceled() const override { return canceled; }
        } progress;
        SplitRunOptions run;
        run.progress = &progress;
        const std::string parent = test::makeTempDir();
        auto outcome = runSplit(*info, *model, *plan, parent + "/out", run);
        QVERIFY(!outcome);
        QVERIFY(outcome.error().isCanceled());
        QVERIFY(fs::is_empty(parent));
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
        QTest::newRow("zero ranks") << A({ "--world_size", "0" }) << "--world_size must be a whole number from 1";
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
