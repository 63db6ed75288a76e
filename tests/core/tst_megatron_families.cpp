// SPDX-License-Identifier: GPL-3.0-or-later
// Model families beyond Llama/Qwen from Megatron: DeepSeek-V3 (MLA, dense first layers then MoE with shared
// experts and an fp32 expert_bias), GLM-4.5, Gemma 2/3, Qwen2.5-VL, and GPT-OSS (sinks, biased experts kept
// stacked, transposed and gate/up interleaved by Hugging Face). The shared torch_dist fixture is real Megatron output; the other layouts
// (legacy with EP, uneven PP, Megatron-LM) are written by `tessera split` from its reference and merged back.

#include "testutil.h"
#include "hfmodels.h"
#include "megatronvalues.h"

#include "formats/mxfp4.h"
#include "formats/safetensors_reader.h"
#include "formats/scan.h"
#include "formats/megatron_names.h"
#include "mapping/megatron_mapping.h"
#include "mapping/megatron_mapping_rules.h"
#include "merge/merge_plan.h"
#include "model/tensor_reindex.h"
#include "text_util.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
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

/// The DeepSeek-V3 fixture's config.json with `edit` applied (a multi-token-prediction layer, …), in a folder of
/// its own.
std::string deepSeekConfig(const std::function<void(nlohmann::json&)>& edit)
{
    auto config = nlohmann::json::parse(test::readFile(reference() + "/config.json"));
    edit(config);
    return config.dump(2);
}

/// A DeepSeek-V3 model with one MTP layer (Hugging Face's layer num_hidden_layers), as the tests write it.
std::string deepSeekWithMtp()
{
    return test::writeHfModel(deepSeekConfig([](nlohmann::json& c) { c["num_nextn_predict_layers"] = 1; }));
}

/// GLM-4.5 as zai-org/GLM-4.5 lays out its config: q/k/v biases, q/k norms, head_dim × heads ≠ hidden, one dense
/// layer first, shared experts, one MTP layer.
const char* const kGlm45Config = R"({
  "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 32, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 3, "intermediate_size": 48, "vocab_size": 100,
  "moe_intermediate_size": 16, "n_routed_experts": 4, "n_shared_experts": 1, "first_k_dense_replace": 1,
  "num_nextn_predict_layers": 1, "attention_bias": true, "use_qk_norm": true, "partial_rotary_factor": 0.5,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

/// GPT-OSS as openai/gpt-oss-20b lays out its config: q/k/v/o biases, attention sinks, head_dim × heads ≠ hidden,
/// every layer MoE with a biased router and the experts stacked (num_local_experts, intermediate_size per expert).
const char* const kGptOssConfig = R"({
  "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 32, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 2, "intermediate_size": 24, "vocab_size": 100,
  "num_local_experts": 4, "num_experts_per_tok": 2, "attention_bias": true, "sliding_window": 128,
  "layer_types": ["sliding_attention", "full_attention"], "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

/// Splits the Hugging Face model `model` into `layout` (split's flags) in a fresh folder; returns it, or nothing
/// (with split's message) when split fails.
std::string splitModel(const std::string& model, const QStringList& layout)
{
    const std::string split = test::makeTempDir() + "/split";
    QString out, err;
    if (test::runTessera(A({ "split", "--hf_dir", model, "--target_dir", split, "--quiet" }) + layout, &out, &err) != 0) {
        qWarning("%s", qPrintable(err));
        return {};
    }
    return split;
}

/// Splits `model` into `layout` and merges it back; true when the bytes are the model's.
bool roundTrips(const std::string& model, const QStringList& layout, std::string* splitDir = nullptr)
{
    const std::string split = splitModel(model, layout);
    if (split.empty())
        return false;
    if (splitDir)
        *splitDir = split;
    const std::string merged = merge(split, model);
    return !merged.empty() && sameFile(merged + "/model.safetensors", model + "/model.safetensors");
}

std::set<std::string> tensorNames(const std::string& checkpoint)
{
    std::set<std::string> names;
    if (auto info = scanCheckpoint(checkpoint))
        for (const auto& t : info->tensors)
            names.insert(t.name);
    return names;
}

/// GPT-OSS as the Hub publishes it (openai/gpt-oss-20b): the experts' gate_up_proj and down_proj in MXFP4, the
/// rest in bf16. The sizes are multiples of 32, as MXFP4 needs.
const char* const kGptOssMxfp4Config = R"({
  "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 64, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 2, "intermediate_size": 32, "vocab_size": 100,
  "num_local_experts": 4, "num_experts_per_tok": 2, "attention_bias": true, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "quantization_config": { "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                      "model.embed_tokens", "lm_head"], "quant_method": "mxfp4" }
})";

/// One expert tensor [E, C, R] as MXFP4 stores it: codes [E, R, C/32, 16], scales [E, R, C/32], and the bf16
/// values transformers' convert_moe_packed_tensors gives for them, worked out here on their own: each code byte's
/// low nibble then high nibble through E2M1's table, times 2^(scale − 127), as [E, R, C], then transposed.
struct Mxfp4Tensor {
    std::string codes, scales;
    test::Values values; ///< bf16 [E, C, R]
};

Mxfp4Tensor mxfp4Tensor(const Shape& shape, std::uint32_t seed)
{
    static const float e2m1[16] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0f, -0.5, -1, -1.5, -2, -3, -4, -6 };
    const std::int64_t E = shape[0], C = shape[1], R = shape[2], G = C / 32;
    Mxfp4Tensor t;
    std::uint32_t state = seed;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    for (std::int64_t i = 0; i < E * R * G * 16; ++i)
        t.codes.push_back(static_cast<char>(next() >> 24));
    for (std::int64_t i = 0; i < E * R * G; ++i)
        t.scales.push_back(static_cast<char>(118 + (next() >> 24) % 18)); // 2^-9 … 2^8
    t.values.resize(static_cast<std::size_t>(E * C * R));
    for (std::int64_t e = 0; e < E; ++e)
        for (std::int64_t r = 0; r < R; ++r)
            for (std::int64_t c = 0; c < C; ++c) {
                const std::int64_t block = (e * R + r) * G + c / 32;
                const auto byte = static_cast<std::uint8_t>(t.codes[block * 16 + (c % 32) / 2]);
                const float code = e2m1[c % 2 ? byte >> 4 : byte & 15];
                const float value = code * std::ldexp(1.0f, static_cast<std::uint8_t>(t.scales[block]) - 127);
                t.values[(e * C + c) * R + r] = test::floatToBf16(value);
            }
    return t;
}

/// Writes a safetensors file of `entries` with `bytes[i]` for entry i.
void writeSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                      const std::vector<std::string>& bytes)
{
    auto layout = planSafetensorsFile(entries, { { "format", "pt" } });
    if (!layout)
        qFatal("%s", layout.error().message.c_str());
    std::string file(layout->fileSize, '\0');
    std::memcpy(file.data(), layout->header.data(), layout->header.size());
    for (std::size_t i = 0; i < entries.size(); ++i)
        std::memcpy(file.data() + layout->dataOffsets[i], bytes[i].data(), bytes[i].size());
    test::writeFile(path, file);
}

/// A GPT-OSS model as the Hub has it, with the MXFP4 scales in a second shard when `shardScales`.
struct Mxfp4Model {
    std::string dir;
    std::map<std::string, test::Values> dequantized; ///< every tensor as transformers loads it (bf16)
    std::string bf16Dir; ///< the same model saved in bf16, as transformers saves it after dequantizing
};

Mxfp4Model writeGptOssMxfp4(bool shardScales)
{
    Mxfp4Model m;
    const std::string root = test::makeTempDir();
    m.dir = root + "/mxfp4";
    m.bf16Dir = root + "/bf16";
    fs::create_directories(m.dir);
    fs::create_directories(m.bf16Dir);
    test::writeFile(m.dir + "/config.json", kGptOssMxfp4Config);
    auto plain = nlohmann::json::parse(kGptOssMxfp4Config);
    plain.erase("quantization_config");
    test::writeFile(m.bf16Dir + "/config.json", plain.dump(2) + "\n");
    auto config = readHfModelConfig(m.dir);
    auto rules = config ? selectMappingRules(config->architectures, config->modelType) : Result<MappingRuleSet>(config.error());
    auto vars = rules ? resolveConfigVars(*config, *rules, { { "value_model", 0 } }) : Result<ConfigVars>(rules.error());
    auto expected = vars ? expectedHfParameters(*rules, *vars) : Result<std::vector<ExpectedParameter>>(vars.error());
    if (!expected)
        qFatal("%s", expected.error().message.c_str());

    std::vector<SafetensorsEntry> weights, scales, bf16;
    std::vector<std::string> weightBytes, scaleBytes, bf16Bytes;
    std::uint16_t next = 0x3c00;
    std::uint32_t seed = 1;
    for (const auto& p : *expected) {
        const bool quantized = endsWith(p.name, "mlp.experts.gate_up_proj") || endsWith(p.name, "mlp.experts.down_proj");
        test::Values values;
        if (quantized) {
            const std::int64_t E = p.shape[0], C = p.shape[1], R = p.shape[2];
            Mxfp4Tensor t = mxfp4Tensor(p.shape, seed++);
            weights.push_back({ p.name + "_blocks", DType::UInt8, { E, R, C / 32, 16 } });
            weightBytes.push_back(t.codes);
            (shardScales ? scales : weights).push_back({ p.name + "_scales", DType::UInt8, { E, R, C / 32 } });
            (shardScales ? scaleBytes : weightBytes).push_back(t.scales);
            values = std::move(t.values);
        } else {
            std::uint64_t n = 1;
            for (auto d : p.shape)
                n *= static_cast<std::uint64_t>(d);
            for (std::uint64_t i = 0; i < n; ++i)
                values.push_back(next++);
            weights.push_back({ p.name, DType::BFloat16, p.shape });
            weightBytes.emplace_back(reinterpret_cast<const char*>(values.data()), values.size() * 2);
        }
        bf16.push_back({ p.name, DType::BFloat16, p.shape });
        bf16Bytes.emplace_back(reinterpret_cast<const char*>(values.data()), values.size() * 2);
        m.dequantized[p.name] = std::move(values);
    }
    writeSafetensors(m.bf16Dir + "/model.safetensors", bf16, bf16Bytes);
    if (!shardScales) {
        writeSafetensors(m.dir + "/model.safetensors", weights, weightBytes);
        return m;
    }
    writeSafetensors(m.dir + "/model-00001-of-00002.safetensors", weights, weightBytes);
    writeSafetensors(m.dir + "/model-00002-of-00002.safetensors", scales, scaleBytes);
    nlohmann::json index;
    index["metadata"] = nlohmann::json::object();
    for (const auto& e : weights)
        index["weight_map"][e.name] = "model-00001-of-00002.safetensors";
    for (const auto& e : scales)
        index["weight_map"][e.name] = "model-00002-of-00002.safetensors";
    test::writeFile(m.dir + "/model.safetensors.index.json", index.dump(2));
    return m;
}

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
        const std::string split = splitModel(reference(), layout);
        QVERIFY(!split.empty());
        const std::string merged = merge(split, reference());
        QVERIFY(!merged.empty());
        QVERIFY(sameFile(merged + "/model.safetensors", reference() + "/model.safetensors"));
    }

    void deepSeekV3TorchDistSplitWritesMegatronsKeys()
    {
        // The fixture is Megatron's own torch_dist: a split of its reference writes the same keys (a mixed stack:
        // per-layer keys, experts stacked on their own axis), global shapes and dtypes, and merges back.
        std::string split;
        QVERIFY(roundTrips(reference(), A({ "--format", "megatron-dist", "--tp", "2", "--pp", "1" }), &split));
        auto ours = scanCheckpoint(split);
        QVERIFY_RESULT(ours);
        auto theirs = scanCheckpoint(test::fixture(std::string(kDeepSeek) + "/global_step_10/actor"));
        QVERIFY_RESULT(theirs);
        auto keys = [](const CheckpointInfo& info) {
            std::map<std::string, std::string> out;
            for (const auto& t : info.tensors)
                out[t.name] = shapeToString(t.shape) + " " + std::string(torchName(t.dtype));
            return out;
        };
        QCOMPARE(keys(*ours), keys(*theirs));
        QVERIFY(ours->find("decoder.layers.1.mlp.experts.experts.linear_fc1.weight"));
    }

    void moeAndMtpRoundTripThroughTorchDist_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("layout");
        QTest::newRow("DeepSeek-V3 with MTP, TP 2") << QStringLiteral("deepseek") << A({ "--tp", "2", "--pp", "1" });
        QTest::newRow("DeepSeek-V3 with MTP, PP 2 uneven")
            << QStringLiteral("deepseek") << A({ "--tp", "1", "--pp", "2", "--num_layers_in_first_pipeline_stage", "1" });
        QTest::newRow("GLM-4.5, TP 2 PP 2 uneven")
            << QStringLiteral("glm") << A({ "--tp", "2", "--pp", "2", "--num_layers_in_last_pipeline_stage", "1" });
    }

    void moeAndMtpRoundTripThroughTorchDist()
    {
        QFETCH(QString, model);
        QFETCH(QStringList, layout);
        const std::string hf = model == QLatin1String("glm") ? test::writeHfModel(kGlm45Config) : deepSeekWithMtp();
        std::string split;
        QVERIFY(roundTrips(hf, A({ "--format", "megatron-dist" }) + layout, &split));
        // The MTP layer keeps its own keys (transformer_layer, as Megatron-core still names it in sharded
        // checkpoints), its experts stacked like the decoder's.
        QVERIFY(tensorNames(split).count("mtp.layers.0.transformer_layer.mlp.experts.experts.linear_fc2.weight"));
    }

    void deepSeekV3UnevenPipelineStages_data()
    {
        QTest::addColumn<QStringList>("layout");
        QTest::addColumn<QString>("recorded");
        QTest::addColumn<QStringList>("stageOfLayer"); // the pipeline-stage folder suffix holding layers 0, 1, 2
        // Three layers over two stages cannot split evenly: the first stage holds the dense layer, or the last
        // stage holds one MoE layer (Megatron-LM's --decoder-last-pipeline-num-layers, recorded in its args).
        QTest::newRow("verl, 1 layer first") << A({ "--format", "megatron", "--tp", "2", "--pp", "2",
                                                    "--num_layers_in_first_pipeline_stage", "1" })
                                             << QStringLiteral("num_layers_in_first_pipeline_stage")
                                             << A({ "_000", "_001", "_001" });
        QTest::newRow("Megatron-LM EP 2, 1 layer last")
            << A({ "--format", "megatron", "--tp", "1", "--pp", "2", "--ep", "2", "--num_layers_in_last_pipeline_stage",
                   "1", "--flavor", "megatron-lm" })
            << QString() << A({ "_000_", "_000_", "_001_" });
        QTest::newRow("verl PP 3, first and last given") << A({ "--format", "megatron", "--tp", "1", "--pp", "3",
                                                                "--num_layers_in_first_pipeline_stage", "1",
                                                                "--num_layers_in_last_pipeline_stage", "1" })
                                                         << QStringLiteral("num_layers_in_last_pipeline_stage")
                                                         << A({ "_000", "_001", "_002" });
    }

    void deepSeekV3UnevenPipelineStages()
    {
        QFETCH(QStringList, layout);
        QFETCH(QString, recorded);
        QFETCH(QStringList, stageOfLayer);
        std::string split;
        QVERIFY(roundTrips(reference(), layout, &split));
        if (!recorded.isEmpty())
            QVERIFY(QString::fromStdString(test::readFile(split + "/transformer_config.json")).contains(recorded));
        // Each layer sits on the stage the uneven split gives it.
        auto info = scanCheckpoint(split);
        QVERIFY_RESULT(info);
        for (int layer = 0; layer < 3; ++layer) {
            const TensorInfo* norm = info->find("decoder.layers." + std::to_string(layer) + ".input_layernorm.weight");
            QVERIFY(norm && !norm->pieces.empty());
            const std::string folder = fs::path(norm->pieces.front().file).parent_path().filename().string();
            QVERIFY2(folder.find(stageOfLayer[layer].toStdString()) != std::string::npos, folder.c_str());
        }
    }

    void unevenStagesThatMegatronRefusesAreRefused()
    {
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", reference(), "--target_dir", test::makeTempDir() + "/s",
                                      "--format", "megatron", "--pp", "2" }),
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("--num_layers_in_first_pipeline_stage")), qPrintable(err)); // the way out
        QCOMPARE(test::runTessera(A({ "split", "--hf_dir", reference(), "--target_dir", test::makeTempDir() + "/s",
                                      "--format", "megatron", "--pp", "3", "--num_layers_in_first_pipeline_stage", "2" }),
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("do not split evenly over the 2 stage(s) between")), qPrintable(err));
    }

    void deepSeekV3MtpLayerRoundTrips_data()
    {
        QTest::addColumn<QStringList>("layout");
        QTest::newRow("legacy TP 2 EP 2") << A({ "--format", "megatron", "--tp", "2", "--pp", "1", "--ep", "2" });
        QTest::newRow("legacy PP 3 VPP-free, MTP on the last stage") << A({ "--format", "megatron", "--tp", "1", "--pp", "3" });
        QTest::newRow("Megatron-LM TP 2 PP 2 uneven") << A({ "--format", "megatron", "--tp", "2", "--pp", "2",
                                                             "--num_layers_in_last_pipeline_stage", "2",
                                                             "--flavor", "megatron-lm", "--iteration", "5" });
    }

    void deepSeekV3MtpLayerRoundTrips()
    {
        QFETCH(QStringList, layout);
        const std::string model = deepSeekWithMtp();
        auto header = readSafetensorsFile(model + "/model.safetensors");
        QVERIFY_RESULT(header);
        std::set<std::string> hf;
        for (const auto& t : header->tensors)
            hf.insert(t.name);
        // Layer 3 (num_hidden_layers) is the MTP layer: a MoE layer with its own norms and projection.
        for (const char* name : { "model.layers.3.enorm.weight", "model.layers.3.eh_proj.weight",
                                  "model.layers.3.shared_head.norm.weight", "model.layers.3.mlp.experts.3.down_proj.weight",
                                  "model.layers.3.self_attn.kv_b_proj.weight" })
            QVERIFY2(hf.count(name), name);
        std::string split;
        QVERIFY(roundTrips(model, layout, &split));
        // Megatron-core's current naming, on the last stage.
        const auto names = tensorNames(split);
        QVERIFY(names.count("mtp.layers.0.eh_proj.weight"));
        QVERIFY(names.count("mtp.layers.0.mtp_model_layer.self_attention.linear_kv_up_proj.weight"));
        QVERIFY(!names.count("decoder.layers.3.input_layernorm.weight"));
    }

    void deepSeekV3MtpInEitherMegatronNaming()
    {
        // verl's converter and Megatron-core before 2026 call the MTP layer's transformer layer transformer_layer.
        const std::string model = deepSeekWithMtp();
        const std::string split = splitModel(model, A({ "--format", "megatron", "--tp", "2", "--ep", "2" }));
        QVERIFY(!split.empty());
        auto info = scanCheckpoint(split);
        QVERIFY_RESULT(info);
        std::set<std::string> expected;
        MappingOptions options;
        options.configDir = model;
        {
            auto mapped = mapMegatronToHf(*info, options);
            QVERIFY_RESULT(mapped);
            for (const auto& t : mapped->mapped.tensors)
                expected.insert(t.name);
        }
        int renamed = 0;
        for (auto& t : info->tensors)
            if (auto at = t.name.find("mtp_model_layer"); at != std::string::npos) {
                t.name.replace(at, std::strlen("mtp_model_layer"), "transformer_layer");
                ++renamed;
            }
        QVERIFY(renamed > 10);
        auto mapped = mapMegatronToHf(*info, options);
        QVERIFY_RESULT(mapped);
        std::set<std::string> got;
        for (const auto& row : mapped->rows) {
            QVERIFY2(row.status == MappingStatus::Ok, qPrintable(QString::fromStdString(row.source + " → " + row.target + ": " + row.detail)));
            if (row.source.find("transformer_layer") != std::string::npos)
                QVERIFY2(row.transform.rfind("rename", 0) == 0, row.transform.c_str());
        }
        for (const auto& t : mapped->mapped.tensors)
            got.insert(t.name);
        QCOMPARE(got, expected);
        QVERIFY(got.count("model.layers.3.mlp.experts.2.gate_proj.weight")); // an expert of EP rank 1, numbered globally
    }

    void mtpAbsentOrUndeclaredIsSaidPlainly()
    {
        // Most runs train without MTP under DeepSeek's own config.json (num_nextn_predict_layers 1): the model is
        // written without it, and the user is told.
        const std::string configDir = test::makeTempDir() + "/config";
        fs::create_directories(configDir);
        test::writeFile(configDir + "/config.json",
                        deepSeekConfig([](nlohmann::json& c) { c["num_nextn_predict_layers"] = 1; }));
        const std::string merged = test::makeTempDir() + "/merged";
        QString out, err;
        QCOMPARE(test::runTessera(A({ "merge", "--backend", "megatron", "--local_dir",
                                      test::fixture(std::string(kDeepSeek) + "/global_step_10/actor"), "--target_dir",
                                      merged, "--hf_model_path", configDir }),
                                  &out, &err),
                 0);
        QVERIFY2(QString(out + err).contains(QStringLiteral("holds no multi-token-prediction layer")), qPrintable(QString(out + err)));
        QVERIFY(sameFile(merged + "/model.safetensors", reference() + "/model.safetensors"));

        // An MTP layer under a config.json that declares none is named as such.
        const std::string model = deepSeekWithMtp();
        const std::string split = splitModel(model, A({ "--format", "megatron" }));
        QVERIFY(!split.empty());
        QCOMPARE(test::runTessera(A({ "merge", "--backend", "megatron", "--local_dir", split, "--target_dir",
                                      test::makeTempDir() + "/m", "--hf_model_path", reference() }),
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("a multi-token-prediction layer's tensor")), qPrintable(err));
    }

    void glm45RoundTripsThroughMegatron_data()
    {
        QTest::addColumn<QStringList>("layout");
        QTest::newRow("legacy TP 2 EP 2") << A({ "--format", "megatron", "--tp", "2", "--pp", "1", "--ep", "2" });
        QTest::newRow("Megatron-LM PP 2 uneven, VPP-free")
            << A({ "--format", "megatron", "--tp", "1", "--pp", "2", "--num_layers_in_first_pipeline_stage", "1",
                   "--flavor", "megatron-lm" });
    }

    void glm45RoundTripsThroughMegatron()
    {
        QFETCH(QStringList, layout);
        const std::string model = test::writeHfModel(kGlm45Config);
        std::string split;
        QVERIFY(roundTrips(model, layout, &split));
        const auto names = tensorNames(split);
        // Megatron-Bridge's names: a fused QKV with its bias, q/k norms, the dense first layer's fused norm, the
        // router's expert bias, and the MTP layer.
        for (const char* name : { "decoder.layers.0.self_attention.linear_qkv.bias", "decoder.layers.0.self_attention.q_layernorm.weight",
                                  "decoder.layers.0.mlp.linear_fc1.layer_norm_weight", "decoder.layers.1.pre_mlp_layernorm.weight",
                                  "decoder.layers.2.mlp.router.expert_bias", "mtp.layers.0.enorm.weight",
                                  "mtp.layers.0.mtp_model_layer.self_attention.linear_qkv.weight" })
            QVERIFY2(names.count(name), name);
    }

    void gptOssRoundTripsThroughMegatron_data()
    {
        QTest::addColumn<QStringList>("layout");
        QTest::newRow("legacy TP 2 EP 2") << A({ "--format", "megatron", "--tp", "2", "--pp", "1", "--ep", "2" });
        QTest::newRow("legacy TP 2 PP 2") << A({ "--format", "megatron", "--tp", "2", "--pp", "2" });
        QTest::newRow("Megatron-LM EP 4") << A({ "--format", "megatron", "--tp", "1", "--pp", "1", "--ep", "4",
                                                 "--flavor", "megatron-lm" });
        QTest::newRow("torch_dist TP 2") << A({ "--format", "megatron-dist", "--tp", "2", "--pp", "1" });
        QTest::newRow("torch_dist PP 2") << A({ "--format", "megatron-dist", "--tp", "1", "--pp", "2" });
    }

    void gptOssRoundTripsThroughMegatron()
    {
        QFETCH(QStringList, layout);
        const std::string model = test::writeHfModel(kGptOssConfig);
        std::string split;
        QVERIFY(roundTrips(model, layout, &split));
        // Megatron-Bridge's names: the sinks as the core attention's softmax offset, the output projection's and
        // the router's biases, one linear (with its bias) per expert, stacked on the expert axis in torch_dist.
        const auto names = tensorNames(split);
        const bool dist = layout.contains(QStringLiteral("megatron-dist"));
        const std::string layer = dist ? "decoder.layers." : "decoder.layers.1.";
        for (const std::string& name : { layer + "self_attention.core_attention.softmax_offset",
                                         layer + "self_attention.linear_proj.bias", layer + "self_attention.linear_qkv.bias",
                                         layer + "pre_mlp_layernorm.weight", layer + "mlp.router.bias" })
            QVERIFY2(names.count(name), name.c_str());
        if (dist) {
            QVERIFY(names.count("decoder.layers.mlp.experts.experts.linear_fc1.weight"));
            QVERIFY(names.count("decoder.layers.mlp.experts.experts.linear_fc2.bias"));
        } else {
            QVERIFY(names.count("decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.bias"));
            QVERIFY(names.count("decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight"));
        }
    }

    void gptOssExpertsAreLaidOutAsTransformersReadsThem()
    {
        // Not only a round trip (a layout wrong both ways would pass one): each Megatron expert's [gate; up] rows
        // are Hugging Face's interleaved columns (gate = [..., ::2], up = [..., 1::2]) of its entry, transposed,
        // and linear_fc2 is down_proj's entry transposed, as Megatron-Bridge's GPT-OSS mappings convert them.
        const std::string model = test::writeHfModel(kGptOssConfig);
        const std::string split = splitModel(model, A({ "--format", "megatron", "--tp", "2", "--ep", "2" }));
        QVERIFY(!split.empty());
        auto megatron = scanCheckpoint(split);
        QVERIFY_RESULT(megatron);
        auto hf = scanCheckpoint(model);
        QVERIFY_RESULT(hf);
        const std::int64_t E = 4, H = 32, I = 24;
        const auto gateUp = test::materialize(*hf->find("model.layers.1.mlp.experts.gate_up_proj"));
        const auto gateUpBias = test::materialize(*hf->find("model.layers.1.mlp.experts.gate_up_proj_bias"));
        const auto down = test::materialize(*hf->find("model.layers.1.mlp.experts.down_proj"));
        const auto downBias = test::materialize(*hf->find("model.layers.1.mlp.experts.down_proj_bias"));
        for (std::int64_t e = 0; e < E; ++e) {
            const std::string expert = "decoder.layers.1.mlp.experts.local_experts." + std::to_string(e);
            const TensorInfo* fc1 = megatron->find(expert + ".linear_fc1.weight");
            const TensorInfo* fc1Bias = megatron->find(expert + ".linear_fc1.bias");
            const TensorInfo* fc2 = megatron->find(expert + ".linear_fc2.weight");
            const TensorInfo* fc2Bias = megatron->find(expert + ".linear_fc2.bias");
            QVERIFY(fc1 && fc1Bias && fc2 && fc2Bias);
            QCOMPARE(fc1->shape, (Shape { 2 * I, H }));
            QCOMPARE(fc2->shape, (Shape { H, I }));
            const auto w1 = test::materialize(*fc1), b1 = test::materialize(*fc1Bias);
            const auto w2 = test::materialize(*fc2), b2 = test::materialize(*fc2Bias);
            for (std::int64_t i = 0; i < I; ++i) {
                for (std::int64_t h = 0; h < H; ++h) {
                    QCOMPARE(gateUp[(e * H + h) * 2 * I + 2 * i], w1[i * H + h]);           // gate
                    QCOMPARE(gateUp[(e * H + h) * 2 * I + 2 * i + 1], w1[(I + i) * H + h]); // up
                    QCOMPARE(down[(e * I + i) * H + h], w2[h * I + i]);
                }
                QCOMPARE(gateUpBias[e * 2 * I + 2 * i], b1[i]);
                QCOMPARE(gateUpBias[e * 2 * I + 2 * i + 1], b1[I + i]);
            }
            for (std::int64_t h = 0; h < H; ++h)
                QCOMPARE(downBias[e * H + h], b2[h]);
        }
    }

    void mxfp4DequantizesAsTransformers()
    {
        // Low nibble first, through E2M1's table, times 2^(scale − 127) in float32: scale 128 doubles, scale 0 gives
        // float32 subnormals, scale 255 is an infinite factor (±inf, and NaN for a zero code).
        std::uint8_t codes[3 * 16] = {};
        codes[0] = 0x21;  // 0.5, then 1
        codes[1] = 0x9F;  // -6, then -0.5
        codes[16] = 0x21;
        codes[32] = 0x10; // 0, then 0.5
        const std::uint8_t scales[3] = { 128, 0, 255 };
        float out[96];
        dequantizeMxfp4(codes, scales, 3, out);
        QCOMPARE(out[0], 1.0f);
        QCOMPARE(out[1], 2.0f);
        QCOMPARE(out[2], -12.0f);
        QCOMPARE(out[3], -1.0f);
        QCOMPARE(out[31], 0.0f);
        QCOMPARE(out[32], std::ldexp(1.0f, -128));
        QCOMPARE(out[33], std::ldexp(1.0f, -127));
        QVERIFY(std::isnan(out[64]));
        QCOMPARE(out[65], std::numeric_limits<float>::infinity());
    }

    void mxfp4ExpertsReadAsTransformersLoadsThem_data()
    {
        QTest::addColumn<bool>("shardScales");
        QTest::newRow("one file") << false;
        QTest::newRow("scales in another shard") << true;
    }

    void mxfp4ExpertsReadAsTransformersLoadsThem()
    {
        // The Hub's GPT-OSS keeps its experts as <name>_blocks and <name>_scales; Tessera shows and reads them as
        // the one bf16 tensor transformers loads, transposed, with the values its dequantizer gives.
        QFETCH(bool, shardScales);
        const Mxfp4Model m = writeGptOssMxfp4(shardScales);
        auto info = scanCheckpoint(m.dir);
        QVERIFY_RESULT(info);
        for (const auto& problem : info->problems)
            QFAIL(problem.text().c_str());
        QCOMPARE(info->tensors.size(), m.dequantized.size());
        const TensorInfo* gateUp = info->find("model.layers.1.mlp.experts.gate_up_proj");
        QVERIFY(gateUp);
        QCOMPARE(gateUp->dtype, DType::BFloat16);
        QCOMPARE(gateUp->shape, (Shape { 4, 64, 64 }));
        QCOMPARE(storedTypeName(gateUp->pieces.front()), std::string("MXFP4"));
        QVERIFY(info->notes.count("mxfp4"));
        for (const auto& t : info->tensors)
            QVERIFY2(test::materialize(t) == m.dequantized.at(t.name), t.name.c_str());
        // One expert cut out of the stack (as a mapping cuts per-expert tensors) keeps its scales with its codes.
        const TensorInfo expert = selectLeading(*gateUp, 2, gateUp->name);
        QCOMPARE(test::materialize(expert), test::rows(m.dequantized.at(gateUp->name), 64 * 64, 2, 1));
    }

    void mxfp4PairsThatDoNotFitAreProblems()
    {
        // Only blocks [E, R, G, 16] with scales [E, R, G] are one MXFP4 tensor. Any other uint8 pair would be copied
        // as raw codes under a config.json that no longer says they are quantized: a problem, never an output.
        const std::string dir = test::makeTempDir() + "/hf";
        fs::create_directories(dir);
        test::writeFile(dir + "/config.json", kGptOssMxfp4Config);
        writeSafetensors(dir + "/model.safetensors",
                         { { "a_blocks", DType::UInt8, { 2, 3, 1, 16 } }, { "a_scales", DType::UInt8, { 2, 3, 1 } },
                           { "b_blocks", DType::UInt8, { 2, 3, 1, 16 } }, { "b_scales", DType::UInt8, { 2, 3, 2 } },
                           { "c_blocks", DType::UInt8, { 3, 1, 16 } }, { "c_scales", DType::UInt8, { 3, 1 } },
                           { "d_blocks", DType::UInt8, { 1, 1, 1, 16 } }, { "d_scales", DType::UInt8, { 1, 1, 1 } },
                           { "d", DType::UInt8, { 1 } }, { "e_blocks", DType::BFloat16, { 2 } },
                           { "e_scales", DType::BFloat16, { 2 } } },
                         { std::string(96, '\x11'), std::string(6, '\x7f'), std::string(96, '\0'), std::string(12, '\0'),
                           std::string(48, '\0'), std::string(3, '\0'), std::string(16, '\0'), std::string(1, '\0'),
                           std::string(1, '\0'), std::string(4, '\0'), std::string(4, '\0') });
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        std::set<std::string> names;
        for (const auto& t : info->tensors)
            names.insert(t.name);
        QCOMPARE(names, (std::set<std::string> { "a", "b_blocks", "b_scales", "c_blocks", "c_scales", "d", "d_blocks",
                                                 "d_scales", "e_blocks", "e_scales" }));
        std::set<std::string> refused;
        for (const auto& p : info->problems)
            refused.insert(p.tensor);
        QCOMPARE(refused, (std::set<std::string> { "b", "c", "d" }));
        const TensorInfo* a = info->find("a");
        QCOMPARE(a->shape, (Shape { 2, 32, 3 }));
        const auto values = test::materialize(*a);
        QCOMPARE(values.size(), std::size_t(2 * 32 * 3));
        for (std::uint16_t v : values)
            QCOMPARE(test::bf16ToFloat(v), 0.5f); // code 1 (0.5) × 2^(127 − 127)

        QString out, err;
        QCOMPARE(test::runTessera(A({ "inspect", dir }), &out, &err), 1);
        QVERIFY2(out.contains(QStringLiteral("b_blocks [2, 3, 1, 16] and b_scales [2, 3, 2] are not one MXFP4 tensor")),
                 qPrintable(out));
        const std::string merged = test::makeTempDir() + "/merged";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", dir, "--target_dir", merged }), &out, &err), 1);
        QVERIFY(!fs::exists(merged));
    }

    // Codes that reach a merge some other way (rank files holding them) are refused where the plan drops the
    // config's quantization_config, rather than written raw.
    void rawQuantizedCodesAreNotWrittenUnderADequantizedConfig()
    {
        const Mxfp4Model m = writeGptOssMxfp4(false);
        auto info = scanSafetensorsFolder(m.dir + "/model.safetensors");
        QVERIFY_RESULT(info);
        CheckpointInfo raw = *info;
        raw.layout = "verl-fsdp"; // as a training checkpoint would hold them: not joined, not decoded
        raw.tensors.clear();
        auto header = readSafetensorsFile(m.dir + "/model.safetensors");
        QVERIFY_RESULT(header);
        for (const auto& t : info->tensors)
            if (!endsWith(t.name, "experts.gate_up_proj") && !endsWith(t.name, "experts.down_proj"))
                raw.tensors.push_back(t);
        for (const auto& h : header->tensors)
            if (endsWith(h.name, "_blocks") || endsWith(h.name, "_scales")) {
                TensorInfo t;
                t.name = h.name;
                t.dtype = h.dtype;
                t.shape = h.shape;
                Piece p;
                p.file = m.dir + "/model.safetensors";
                p.shape = h.shape;
                p.offsets = Shape(h.shape.size(), 0);
                p.strides = Shape(h.shape.size(), 1);
                for (std::size_t d = h.shape.size(); d-- > 1;)
                    p.strides[d - 1] = p.strides[d] * h.shape[d];
                p.storedDtype = h.dtype;
                p.dataOffset = h.begin;
                t.pieces.push_back(p);
                raw.tensors.push_back(t);
            }
        raw.problems.clear();
        auto plan = planMerge(raw, {});
        QVERIFY(!plan);
        QVERIFY2(plan.error().message.find("quantized codes") != std::string::npos
                     && plan.error().message.find("model.layers.0.mlp.experts.gate_up_proj_blocks") != std::string::npos,
                 plan.error().message.c_str());
    }

    void mxfp4ModelMergesDiffsAndSplits()
    {
        // Merged, it is the bf16 model transformers saves after dequantizing, and config.json loses its
        // quantization_config; diffed against that model, every tensor is identical; split into Megatron, the
        // experts go out as bf16 and merge back bit-exact.
        const Mxfp4Model m = writeGptOssMxfp4(true);
        QString out, err;
        QCOMPARE(test::runTessera(A({ "inspect", m.dir }), &out, &err), 0);
        QVERIFY(out.contains(QStringLiteral("4 MXFP4 tensors")));
        const std::string merged = test::makeTempDir() + "/merged";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", m.dir, "--target_dir", merged, "--quiet" }), &out, &err), 0);
        QVERIFY(sameFile(merged + "/model.safetensors", m.bf16Dir + "/model.safetensors"));
        QVERIFY(!nlohmann::json::parse(test::readFile(merged + "/config.json")).contains("quantization_config"));

        QCOMPARE(test::runTessera(A({ "diff", m.dir, m.bf16Dir, "--json" }), &out, &err), 0);
        const auto report = nlohmann::json::parse(out.toStdString());
        QCOMPARE(report["counts"]["identical"].get<std::size_t>(), m.dequantized.size());

        const std::string split = splitModel(m.dir, A({ "--format", "megatron", "--tp", "2", "--ep", "2" }));
        QVERIFY(!split.empty());
        const std::string back = merge(split);
        QVERIFY(!back.empty());
        QVERIFY(sameFile(back + "/model.safetensors", m.bf16Dir + "/model.safetensors"));
        QVERIFY(!nlohmann::json::parse(test::readFile(back + "/config.json")).contains("quantization_config"));
        // A Megatron merge given the Hub's MXFP4 folder for its config writes bf16 weights: the config says so.
        const std::string withHubConfig = merge(split, m.dir);
        QVERIFY(!withHubConfig.empty());
        QVERIFY(!nlohmann::json::parse(test::readFile(withHubConfig + "/config.json")).contains("quantization_config"));
    }

    void gptOssMappingShowsTheStackedExperts()
    {
        const std::string model = test::writeHfModel(kGptOssConfig);
        const std::string split = splitModel(model, A({ "--format", "megatron", "--tp", "2", "--ep", "2" }));
        QVERIFY(!split.empty());
        auto info = scanCheckpoint(split);
        QVERIFY_RESULT(info);
        MappingOptions options;
        options.configDir = model;
        {
            auto mapped = mapMegatronToHf(*info, options);
            QVERIFY_RESULT(mapped);
            QCOMPARE(mapped->family, std::string("gpt_oss"));
            int experts = 0;
            for (const auto& row : mapped->rows) {
                QVERIFY2(row.status == MappingStatus::Ok, qPrintable(QString::fromStdString(row.source + " → " + row.target + ": " + row.detail)));
                if (row.target == "model.layers.0.mlp.experts.gate_up_proj") {
                    ++experts; // one row per Megatron expert, each saying how it is laid
                    QCOMPARE(row.transform, std::string("stack_experts (transposed, gate/up interleaved)"));
                    QCOMPARE(row.targetShape, (Shape { 4, 32, 48 }));
                }
            }
            QCOMPARE(experts, 4);
            const TensorInfo* gateUp = mapped->mapped.find("model.layers.0.mlp.experts.gate_up_proj");
            QVERIFY(gateUp);
            QCOMPARE(gateUp->shape, (Shape { 4, 32, 24, 2 })); // the boxes' index space
            QCOMPARE(gateUp->outputShape(), (Shape { 4, 32, 48 }));
        }
        // An expert rank's folders gone: the stacked tensors say which experts no source fills.
        fs::remove_all(split + "/model/mp_rank_00_001");
        fs::remove_all(split + "/model/mp_rank_01_001");
        auto partial = scanCheckpoint(split);
        QVERIFY_RESULT(partial);
        auto mapped = mapMegatronToHf(*partial, options);
        QVERIFY_RESULT(mapped);
        bool named = false;
        for (const auto& row : mapped->rows)
            named = named || (row.target == "model.layers.1.mlp.experts.down_proj" && row.status == MappingStatus::Missing
                              && row.detail.find("expert(s) 2, 3") != std::string::npos);
        QVERIFY(named);
        QVERIFY(!mapped->mapped.find("model.layers.1.mlp.experts.down_proj"));
    }

    void stackExpertsRulesAreChecked()
    {
        auto base = builtinMappingRules("gpt_oss");
        QVERIFY_RESULT(base);
        // The target holds every expert, so it cannot name one.
        auto numbered = overlayMappingRules(*base, R"({ "rules": [ { "id": "expert_down",
            "megatron": "decoder.layers.{layer}.mlp.experts.local_experts.{expert}.linear_fc2.weight",
            "hf": "model.layers.{layer}.mlp.experts.{expert}.down_proj", "transform": "stack_experts" } ] })", "rules.json");
        QVERIFY(!numbered);
        QVERIFY2(numbered.error().message.find("needs {expert} in every Megatron pattern") != std::string::npos,
                 numbered.error().message.c_str());
        auto stray = overlayMappingRules(*base, R"({ "rules": [ { "id": "o_proj",
            "megatron": "decoder.layers.{layer}.self_attention.linear_proj.weight",
            "hf": "model.layers.{layer}.self_attn.o_proj.weight", "transpose": true } ] })", "rules.json");
        QVERIFY(!stray);
        QVERIFY2(stray.error().message.find("belong to transform 'stack_experts'") != std::string::npos,
                 stray.error().message.c_str());
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
        const std::string split = splitModel(model, layout);
        QVERIFY(!split.empty());
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

    void qwen25VlInMegatronBridgesLayoutIsBitExact()
    {
        // Megatron-Bridge keeps the Hugging Face vision tower itself (visual.*, whole on every rank) beside the
        // language model's Megatron names: here verl's fixture with its Megatron ViT swapped for the reference's
        // tower, every other piece read from the rank files as they are.
        auto info = scanCheckpoint(test::fixture(std::string(kQwen25Vl) + "/global_step_10/actor"));
        QVERIFY_RESULT(info);
        auto ref = scanCheckpoint(test::fixture(std::string(kQwen25Vl) + "/reference"));
        QVERIFY_RESULT(ref);
        std::vector<TensorInfo> tensors;
        for (const auto& t : info->tensors)
            if (t.name.rfind("vision_model.", 0) != 0)
                tensors.push_back(t);
        int tower = 0;
        for (const auto& t : ref->tensors)
            if (t.name.rfind("visual.", 0) == 0) {
                tensors.push_back(t);
                ++tower;
            }
        QVERIFY(tower > 10);
        info->tensors = std::move(tensors);
        MappingOptions options;
        auto mapped = mapMegatronToHf(*info, options);
        QVERIFY_RESULT(mapped);
        for (const auto& row : mapped->rows)
            QVERIFY2(row.status == MappingStatus::Ok, qPrintable(QString::fromStdString(row.source + " → " + row.target + ": " + row.detail)));
        QCOMPARE(mapped->mapped.tensors.size(), ref->tensors.size());
        for (const auto& t : mapped->mapped.tensors) {
            const TensorInfo* expected = ref->find(t.name);
            QVERIFY2(expected, t.name.c_str());
            QCOMPARE(t.shape, expected->shape);
            QVERIFY2(test::materialize(t) == test::materialize(*expected), t.name.c_str());
        }
    }

    void qwen25VlSplitsAsVerlsMegatronModel()
    {
        // A split of the reference writes what verl's Megatron model saved (the fixture): the same tensors with the
        // same global shapes and dtypes, the ViT's per-head QKV included, and merges back bit for bit.
        const std::string ref = test::fixture(std::string(kQwen25Vl) + "/reference");
        std::string split;
        // verl builds its Megatron models with the vocabulary unpadded.
        QVERIFY(roundTrips(ref, A({ "--format", "megatron", "--tp", "2", "--pp", "1", "--make_vocab_size_divisible_by", "1" }),
                           &split));
        auto ours = scanCheckpoint(split);
        QVERIFY_RESULT(ours);
        for (const auto& p : ours->problems)
            QFAIL(p.text().c_str());
        auto theirs = scanCheckpoint(test::fixture(std::string(kQwen25Vl) + "/global_step_10/actor"));
        QVERIFY_RESULT(theirs);
        auto keys = [](const CheckpointInfo& info) {
            std::map<std::string, std::string> out;
            for (const auto& t : info.tensors)
                out[t.name] = shapeToString(t.shape) + " " + std::string(torchName(t.dtype)) + " " + t.placement;
            return out;
        };
        QCOMPARE(keys(*ours), keys(*theirs));
        // And each tensor's bytes are the fixture's.
        for (const auto& t : ours->tensors)
            QVERIFY2(test::materialize(t) == test::materialize(*theirs->find(t.name)), t.name.c_str());
    }

    void qwen25VlRoundTripsThroughOtherLayouts_data()
    {
        QTest::addColumn<QStringList>("layout");
        QTest::newRow("legacy PP 2: the tower on the first stage") << A({ "--format", "megatron", "--tp", "1", "--pp", "2" });
        QTest::newRow("torch_dist TP 2") << A({ "--format", "megatron-dist", "--tp", "2", "--pp", "1" });
        QTest::newRow("Megatron-LM TP 2 PP 2") << A({ "--format", "megatron", "--tp", "2", "--pp", "2", "--flavor", "megatron-lm" });
    }

    void qwen25VlRoundTripsThroughOtherLayouts()
    {
        QFETCH(QStringList, layout);
        std::string split;
        QVERIFY(roundTrips(test::fixture(std::string(kQwen25Vl) + "/reference"), layout, &split));
        const auto names = tensorNames(split);
        if (layout.contains(QStringLiteral("megatron-dist"))) {
            // Each TransformerBlock is stacked on its own layer axis.
            QVERIFY(names.count("language_model.decoder.layers.self_attention.linear_qkv.weight"));
            QVERIFY(names.count("vision_model.decoder.layers.self_attention.linear_qkv.weight"));
        } else {
            QVERIFY(names.count("vision_model.decoder.layers.1.self_attention.linear_qkv.weight"));
        }
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
        const std::string split = splitModel(reference(), A({ "--format", "megatron", "--tp", "2", "--pp", "1", "--ep", "2" }));
        QVERIFY(!split.empty());
        QString out, err;
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
