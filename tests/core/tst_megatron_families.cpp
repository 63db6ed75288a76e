// SPDX-License-Identifier: GPL-3.0-or-later
// Model families beyond Llama/Qwen from Megatron: DeepSeek-V3 (MLA, dense first layers then MoE with shared
// experts and an fp32 expert_bias). The shared torch_dist fixture is real Megatron output; the other layouts
// (legacy with EP, uneven PP, Megatron-LM) are written by `tessera split` from its reference and merged back.

#include "testutil.h"
#include "hfmodels.h"

#include "formats/safetensors_reader.h"
#include "formats/scan.h"
#include "formats/megatron_names.h"
#include "mapping/megatron_mapping.h"
#include "mapping/megatron_mapping_rules.h"

#include <QTest>

#include <filesystem>
#include <set>

using namespace tessera;
using test::A;
namespace fs = std::filesystem;

namespace {

const char* const kDeepSeek = "megatron_dist_deepseekv3_tp2_pp1";
const char* const kQwen25Vl = "megatron_legacy_qwen25vl_tp2_pp1";

std::string reference() { return test::fixture(std::string(kDeepSeek) + "/reference"); }

/// Merges `checkpoint` (its config from `configDir` when given) into a fresh folder; returns it.
std::string merge(const std::string& checkpoint, const std::string& configDir = {})
{
    const std::string merged = test::makeTempDir() + "/merged";
    QStringList args = A({ "merge", "--backend", "megatron", "--local_dir", checkpoint, "--target_dir", merged, "--quiet" });
    if (!configDir.empty())
        args << A({ "--hf_model_path", configDir });
    QString out, err;
    const int code = test::runTessera(args, &out, &err);
    if (code != 0)
        qWarning("%s", qPrintable(err));
    return code == 0 ? merged : std::string();
}

bool sameFile(const std::string& a, const std::string& b) { return test::readFile(a) == test::readFile(b); }

/// Gemma 3 text as google/gemma-3-1b-it lays out its config: head_dim × heads (64) ≠ hidden (32), tied embeddings.
const char* const kGemma3Config = R"({
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 32, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 4, "intermediate_size": 48, "vocab_size": 100,
  "tie_word_embeddings": true, "query_pre_attn_scalar": 16, "torch_dtype": "bfloat16"
})";

/// Gemma 2: the same norms without q/k norm; tie_word_embeddings left to the family's default (tied).
const char* const kGemma2Config = R"({
  "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 32, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 4, "intermediate_size": 48, "vocab_size": 100,
  "torch_dtype": "bfloat16"
})";

} // namespace

class TestMegatronFamilies : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void deepSeekV3TorchDistIsBitExact()
    {
        const std::string merged = merge(test::fixture(std::string(kDeepSeek) + "/global_step_10/actor"));
        QVERIFY(!merged.empty());
        QVERIFY(sameFile(merged + "/model.safetensors", reference() + "/model.safetensors"));
        QVERIFY(sameFile(merged + "/config.json", reference() + "/config.json"));
        // The router's expert_bias keeps its own dtype beside the bf16 weights.
        auto header = readSafetensorsFile(merged + "/model.safetensors");
        QVERIFY_RESULT(header);
        int biases = 0;
        for (const auto& t : header->tensors)
            if (t.name.find("e_score_correction_bias") != std::string::npos) {
                QCOMPARE(t.dtype, DType::Float32);
                ++biases;
            }
        QCOMPARE(biases, 2); // layer 0 is dense
    }

    void deepSeekV3MappingShowsMlaAndExperts()
    {
        auto info = scanCheckpoint(test::fixture(std::string(kDeepSeek) + "/global_step_10/actor"));
        QVERIFY_RESULT(info);
        MappingOptions options;
        auto mapped = mapMegatronToHf(*info, options);
        QVERIFY_RESULT(mapped);
        QCOMPARE(mapped->family, std::string("deepseek_v3"));
        bool qUp = false, stackedExperts = false, denseMlp = false, moeDense = false;
        for (const auto& row : mapped->rows) {
            qUp = qUp || (row.source == "decoder.layers.1.self_attention.linear_q_up_proj.weight"
                          && row.target == "model.layers.1.self_attn.q_b_proj.weight");
            stackedExperts = stackedExperts || row.target == "model.layers.2.mlp.experts.3.up_proj.weight";
            denseMlp = denseMlp || row.target == "model.layers.0.mlp.gate_proj.weight";
            // The MoE layers have no dense MLP, so nothing is expected (or missing) there.
            moeDense = moeDense || row.target == "model.layers.1.mlp.gate_proj.weight";
            QVERIFY2(row.status == MappingStatus::Ok, qPrintable(QString::fromStdString(row.source + " → " + row.target + ": " + row.detail)));
        }
        QVERIFY(qUp && stackedExperts && denseMlp && !moeDense);
    }

    void deepSeekV3RoundTripsThroughEveryLegacyLayout_data()
    {
        QTest::addColumn<QStringList>("layout");
        QTest::newRow("legacy TP 2 EP 2") << A({ "--format", "megatron", "--tp", "2", "--pp", "1", "--ep", "2" });
        QTest::newRow("legacy PP 3, a layer a stage") << A({ "--format", "megatron", "--tp", "1", "--pp", "3" });
        QTest::newRow("Megatron-LM TP 2 EP 4") << A({ "--format", "megatron", "--tp", "2", "--pp", "1", "--ep", "4",
                                                        "--flavor", "megatron-lm" });
    }

    void deepSeekV3RoundTripsThroughEveryLegacyLayout()
    {
        QFETCH(QStringList, layout);
        const std::string split = test::makeTempDir() + "/split";
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", reference(), "--target_dir", split, "--quiet" }) + layout, &out, &err), 0);
        const std::string merged = merge(split, reference());
        QVERIFY(!merged.empty());
        QVERIFY(sameFile(merged + "/model.safetensors", reference() + "/model.safetensors"));
    }

    void gemmaRoundTripsThroughEveryMegatronLayout_data()
    {
        QTest::addColumn<QString>("config");
        QTest::addColumn<QStringList>("layout");
        for (const auto& [family, config] : { std::pair<const char*, const char*> { "gemma3", kGemma3Config },
                                              std::pair<const char*, const char*> { "gemma2", kGemma2Config } }) {
            QTest::newRow(qPrintable(QStringLiteral("%1 legacy TP 2 PP 2").arg(QLatin1String(family))))
                << QString::fromUtf8(config) << A({ "--format", "megatron", "--tp", "2", "--pp", "2" });
            QTest::newRow(qPrintable(QStringLiteral("%1 Megatron-LM VPP 2").arg(QLatin1String(family))))
                << QString::fromUtf8(config)
                << A({ "--format", "megatron", "--tp", "2", "--pp", "2", "--vpp", "2", "--flavor", "megatron-lm" });
            QTest::newRow(qPrintable(QStringLiteral("%1 torch_dist TP 2").arg(QLatin1String(family))))
                << QString::fromUtf8(config) << A({ "--format", "megatron-dist", "--tp", "2", "--pp", "1" });
        }
    }

    void gemmaRoundTripsThroughEveryMegatronLayout()
    {
        QFETCH(QString, config);
        QFETCH(QStringList, layout);
        const std::string model = test::writeHfModel(config.toStdString());
        const std::string split = test::makeTempDir() + "/split";
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", model, "--target_dir", split, "--quiet" }) + layout, &out, &err), 0);
        // The Megatron names are Megatron-Bridge's: the post-attention and post-feed-forward norms inside the row
        // linears, q/k norms as their own modules (Gemma 3).
        auto info = scanCheckpoint(split);
        QVERIFY_RESULT(info);
        std::set<std::string> names;
        for (const auto& t : info->tensors)
            names.insert(t.name);
        const bool stacked = names.count("decoder.layers.self_attention.linear_proj.post_layernorm.weight") > 0;
        const std::string layer = stacked ? "decoder.layers." : "decoder.layers.0.";
        QVERIFY(names.count(layer + "self_attention.linear_proj.post_layernorm.weight"));
        QVERIFY(names.count(layer + "mlp.linear_fc2.post_layernorm.weight"));
        QVERIFY(names.count(layer + "mlp.linear_fc1.layer_norm_weight"));
        QCOMPARE(names.count(layer + "self_attention.q_layernorm.weight") > 0, config.contains(QStringLiteral("Gemma3")));
        QVERIFY(!names.count("output_layer.weight") || layout.contains(QStringLiteral("--pp"))); // tied
        const std::string merged = merge(split, model);
        QVERIFY(!merged.empty());
        QVERIFY(sameFile(merged + "/model.safetensors", model + "/model.safetensors"));
    }

    void qwen25VlFromVerlsMegatronModelIsBitExact()
    {
        const std::string actor = test::fixture(std::string(kQwen25Vl) + "/global_step_10/actor");
        auto info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        // A Megatron-core vision-language model, not a pre-mcore one; its tower's sizes are not the decoder's.
        for (const auto& p : info->problems)
            QFAIL(p.text().c_str());
        const TensorInfo* patch = info->find("vision_model.patch_embed.proj.weight");
        QVERIFY(patch);
        QCOMPARE(patch->shape, (Shape { 32, 3, 2, 4, 4 })); // replicated, not split over TP
        const std::string merged = merge(actor);
        QVERIFY(!merged.empty());
        const std::string ref = test::fixture(std::string(kQwen25Vl) + "/reference");
        QVERIFY(sameFile(merged + "/model.safetensors", ref + "/model.safetensors"));
        QVERIFY(sameFile(merged + "/config.json", ref + "/config.json"));

        MappingOptions options;
        auto mapped = mapMegatronToHf(*info, options);
        QVERIFY_RESULT(mapped);
        QCOMPARE(mapped->family, std::string("qwen2_5_vl"));
        bool fusedQkv = false;
        for (const auto& row : mapped->rows) {
            QVERIFY2(row.status == MappingStatus::Ok, qPrintable(QString::fromStdString(row.source + " → " + row.target + ": " + row.detail)));
            fusedQkv = fusedQkv || (row.target == "visual.blocks.1.attn.qkv.weight" && row.transform == "fuse_qkv_heads");
        }
        QVERIFY(fusedQkv);
    }

    void visionLanguageSplitIsRefusedNotHalfWritten()
    {
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", test::fixture(std::string(kQwen25Vl) + "/reference"),
                                      "--target_dir", test::makeTempDir() + "/split", "--format", "megatron", "--tp", "2",
                                      "--pp", "1" }),
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("does not write vision towers yet")), qPrintable(err));
    }

    void fuseQkvHeadsNeedsTheHeadCount()
    {
        auto base = builtinMappingRules("qwen2_5_vl");
        QVERIFY_RESULT(base);
        auto broken = overlayMappingRules(*base, R"({ "rules": [ { "id": "visual_qkv_weight",
            "megatron": "vision_model.decoder.layers.{block}.self_attention.linear_qkv.weight",
            "hf": "visual.blocks.{block}.attn.qkv.weight", "transform": "fuse_qkv_heads" } ] })", "rules.json");
        QVERIFY(!broken);
        QVERIFY2(broken.error().message.find("needs \"heads\"") != std::string::npos, broken.error().message.c_str());
        // Megatron-Bridge's layout keeps the Hugging Face tower whole on every rank.
        QCOMPARE(megatronTpSplit("visual.blocks.0.attn.qkv.weight", true), MegatronTpSplit::Replicated);
        QCOMPARE(megatronTpSplit("vision_model.projection.encoder.linear_fc1.weight", true), MegatronTpSplit::Rows);
        QCOMPARE(megatronTpSplit("vision_model.decoder.layers.0.mlp.linear_fc1.weight", true), MegatronTpSplit::GluRows);
    }

    void droppedExpertFoldersAreNamed()
    {
        // What verl's legacy saver leaves with EP 2: the expert rank 0 folders only.
        const std::string split = test::makeTempDir() + "/split";
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", reference(), "--target_dir", split, "--format", "megatron",
                                      "--tp", "2", "--pp", "1", "--ep", "2", "--quiet" }),
                                  &out, &err),
                 0);
        fs::remove_all(split + "/model/mp_rank_00_001");
        fs::remove_all(split + "/model/mp_rank_01_001");
        QCOMPARE(test::runTessera(A({ "merge", "--backend", "megatron", "--local_dir", split, "--target_dir",
                                      test::makeTempDir() + "/merged", "--hf_model_path", reference() }),
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("only the expert rank 0 folders are present")), qPrintable(err));
        QVERIFY(err.contains(QStringLiteral("verl's legacy Megatron saver")));
        QVERIFY(err.contains(QStringLiteral("model.layers.1.mlp.experts.2.gate_proj.weight: missing")));
    }
};

QTEST_GUILESS_MAIN(TestMegatronFamilies)
#include "tst_megatron_families.moc"
