// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron → Hugging Face merges end to end: the fixtures bit-exact through the library and the CLI, and a
// small MoE checkpoint (TP 2 × EP 2, legacy per-rank files written here) whose experts must land under
// qwen3_moe's and mixtral's names, value for value.

#include "megatronvalues.h"
#include "testutil.h"

#include "mapping/megatron_mapping.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "formats/safetensors_reader.h"
#include "formats/scan.h"
#include "pickle/torch_save_writer.h"

#include <QTest>

#include <cstring>
#include <filesystem>
#include <map>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

using test::materialize;
using test::rows;
using test::Values;
using test::Split;
using test::localSlice;

QString q(const std::string& s) { return QString::fromStdString(s); }

std::string actor(const char* c) { return test::fixture(std::string(c) + "/global_step_10/actor"); }

/// A 2-layer MoE model: hidden 4, 4 heads in 2 query groups of head_dim 2, 4 experts of width 2, vocabulary 6
/// padded to 8. Written as verl's legacy layout with TP 2 and EP 2 (mp_rank_TT_EEE/model.pt, local expert
/// numbers), every element distinct. `global` holds the global tensors under their global Megatron names.
struct MoeCheckpoint {
    std::string actor;
    std::map<std::string, Values> global;
    std::map<std::string, Shape> shapes;
};

MoeCheckpoint writeMoe(const std::string& hfConfig, bool qkNorm)
{
    MoeCheckpoint c;
    c.actor = test::makeTempDir() + "/actor";
    fs::create_directories(c.actor + "/huggingface");
    test::writeFile(c.actor + "/huggingface/config.json", hfConfig);
    test::writeFile(c.actor + "/transformer_config.json",
                    R"({"num_layers": 2, "hidden_size": 4, "ffn_hidden_size": 2, "num_attention_heads": 4,
                        "num_query_groups": 2, "kv_channels": 2, "tensor_model_parallel_size": 2,
                        "pipeline_model_parallel_size": 1, "expert_model_parallel_size": 2, "num_moe_experts": 4,
                        "gated_linear_unit": true})");
    const int tp = 2, ep = 2, localExperts = 2;
    std::uint16_t next = 1;
    struct Param {
        std::string name; // global name
        Shape shape;
        Split split;
        int expert = -1;  // global expert, -1 for shared tensors
        int localExpert = -1;
        std::string localName;
    };
    std::vector<Param> params;
    auto add = [&](const std::string& name, Shape shape, Split split) { params.push_back({ name, shape, split, -1, -1, name }); };
    add("embedding.word_embeddings.weight", { 8, 4 }, Split::Rows);
    for (int l = 0; l < 2; ++l) {
        const std::string p = "decoder.layers." + std::to_string(l) + ".";
        add(p + "self_attention.linear_qkv.layer_norm_weight", { 4 }, Split::Replicated);
        add(p + "self_attention.linear_qkv.weight", { 16, 4 }, Split::Rows);
        if (qkNorm) {
            add(p + "self_attention.q_layernorm.weight", { 2 }, Split::Replicated);
            add(p + "self_attention.k_layernorm.weight", { 2 }, Split::Replicated);
        }
        add(p + "self_attention.linear_proj.weight", { 4, 8 }, Split::Columns);
        add(p + "pre_mlp_layernorm.weight", { 4 }, Split::Replicated);
        add(p + "mlp.router.weight", { 4, 4 }, Split::Replicated);
        for (int e = 0; e < 4; ++e)
            for (const char* fc : { "linear_fc1", "linear_fc2" }) {
                const bool fc1 = std::string(fc) == "linear_fc1";
                Param x;
                x.name = p + "mlp.experts.local_experts." + std::to_string(e) + "." + fc + ".weight";
                x.localName = p + "mlp.experts.local_experts." + std::to_string(e % localExperts) + "." + fc + ".weight";
                x.shape = fc1 ? Shape { 4, 4 } : Shape { 4, 2 };
                x.split = fc1 ? Split::Glu : Split::Columns;
                x.expert = e;
                params.push_back(x);
            }
    }
    add("decoder.final_layernorm.weight", { 4 }, Split::Replicated);
    add("output_layer.weight", { 8, 4 }, Split::Rows);
    for (const auto& p : params) {
        std::int64_t n = 1;
        for (auto d : p.shape)
            n *= d;
        Values v(static_cast<std::size_t>(n));
        for (auto& x : v)
            x = next++;
        c.global[p.name] = v;
        c.shapes[p.name] = p.shape;
    }
    for (int e = 0; e < ep; ++e)
        for (int r = 0; r < tp; ++r) {
            std::vector<TorchSaveTensor> specs;
            std::vector<Values> data;
            for (const auto& p : params) {
                if (p.expert >= 0 && p.expert / localExperts != e)
                    continue;
                Shape local;
                data.push_back(localSlice(c.global[p.name], p.shape, p.split, r, tp, local));
                TorchSaveTensor t;
                t.name = p.localName;
                t.dtype = DType::BFloat16;
                t.shape = local;
                specs.push_back(t);
            }
            char folder[64];
            std::snprintf(folder, sizeof folder, "/model/mp_rank_%02d_%03d", r, e);
            fs::create_directories(c.actor + folder);
            test::writeRankFile(c.actor + folder + "/model.pt", specs, data);
        }
    return c;
}

const char* kMoeSizes = R"("hidden_size": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 2,
    "num_hidden_layers": 2, "vocab_size": 6, "tie_word_embeddings": false, "torch_dtype": "bfloat16")";

/// Merges `actor` into a folder and returns its tensors by name.
std::map<std::string, Values> mergeAndRead(const std::string& actorDir, std::size_t* count)
{
    auto info = scanCheckpoint(actorDir);
    if (!info)
        qFatal("%s", info.error().message.c_str());
    auto mapped = mapMegatronToHf(*info, {});
    if (!mapped)
        qFatal("%s", mapped.error().message.c_str());
    std::string problems;
    for (const auto& p : mapped->mapped.problems)
        problems += p.text() + "\n";
    if (!problems.empty())
        qFatal("%s", problems.c_str());
    auto plan = planMerge(mapped->mapped, {});
    if (!plan)
        qFatal("%s", plan.error().message.c_str());
    const std::string out = test::makeTempDir() + "/model";
    auto outcome = mergeCheckpoint(mapped->mapped, *plan, out, {});
    if (!outcome)
        qFatal("%s", outcome.error().message.c_str());
    auto merged = scanSafetensorsFolder(out);
    if (!merged)
        qFatal("%s", merged.error().message.c_str());
    std::map<std::string, Values> byName;
    for (const auto& t : merged->tensors)
        byName[t.name] = materialize(t);
    *count = merged->tensors.size();
    return byName;
}

} // namespace

class TestMegatronMerge : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void fixturesMergeBitExact_data()
    {
        QTest::addColumn<QString>("fixture");
        QTest::newRow("legacy qwen2") << QStringLiteral("megatron_legacy_qwen2_tp2_pp2");
        QTest::newRow("torch_dist llama") << QStringLiteral("megatron_dist_llama_tp2_pp2");
    }
    void fixturesMergeBitExact()
    {
        QFETCH(QString, fixture);
        const std::string name = fixture.toStdString();
        auto info = scanCheckpoint(actor(name.c_str()));
        QVERIFY_RESULT(info);
        auto mapped = mapMegatronToHf(*info, {});
        QVERIFY_RESULT(mapped);
        QVERIFY(mapped->problems.empty());
        auto plan = planMerge(mapped->mapped, {});
        QVERIFY_RESULT(plan);
        const std::string out = test::makeTempDir() + "/model";
        QVERIFY_RESULT(mergeCheckpoint(mapped->mapped, *plan, out, {}));
        for (const auto& entry : fs::directory_iterator(test::fixture(name + "/reference"))) {
            const std::string file = entry.path().filename().string();
            QVERIFY2(test::readFile(entry.path().string()) == test::readFile(out + "/" + file), file.c_str());
        }
    }

    void commandLineMergeAndTest_data() { fixturesMergeBitExact_data(); }
    void commandLineMergeAndTest()
    {
        QFETCH(QString, fixture);
        const std::string name = fixture.toStdString();
        const std::string out = test::makeTempDir() + "/merged";
        QString stdOut, stdErr;
        for (const char* backend : { "megatron", "auto" }) {
            const int code = test::runTessera({ QStringLiteral("merge"), QStringLiteral("--backend"), QString::fromUtf8(backend),
                                                QStringLiteral("--local_dir"), q(actor(name.c_str())),
                                                QStringLiteral("--target_dir"), q(out), QStringLiteral("--quiet") },
                                              &stdOut, &stdErr);
            QVERIFY2(code == 0, qPrintable(stdErr));
            QVERIFY(test::readFile(out + "/model.safetensors") == test::readFile(test::fixture(name + "/reference/model.safetensors")));
            fs::remove_all(out);
        }
        const int code = test::runTessera({ QStringLiteral("test"), QStringLiteral("--backend"), QStringLiteral("megatron"),
                                            QStringLiteral("--local_dir"), q(actor(name.c_str())),
                                            QStringLiteral("--test_hf_dir"), q(test::fixture(name + "/reference")),
                                            QStringLiteral("--quiet") },
                                          &stdOut, &stdErr);
        QVERIFY2(code == 0, qPrintable(stdOut + stdErr));
        QVERIFY(stdOut.contains(QStringLiteral("OK:")));
    }

    void commandLineRefusesABrokenMapping()
    {
        // An unmapped name fails the merge under --strict (the default) and passes with --ignore_missing_params.
        const std::string copy = test::makeTempDir() + "/actor";
        fs::copy(actor("megatron_legacy_qwen2_tp2_pp2"), copy, fs::copy_options::recursive);
        const std::string rules = test::makeTempDir() + "/rules.json";
        test::writeFile(rules, R"({"rules": [{"id": "final_norm", "remove": true}]})");
        QString stdOut, stdErr;
        const QStringList base { QStringLiteral("merge"), QStringLiteral("--local_dir"), q(copy), QStringLiteral("--target_dir"),
                                 q(test::makeTempDir() + "/out"), QStringLiteral("--param_mapping"), q(rules),
                                 QStringLiteral("--quiet") };
        QCOMPARE(test::runTessera(base, &stdOut, &stdErr), 1);
        QVERIFY2(stdErr.contains(QStringLiteral("unmapped: no qwen2 rule maps decoder.final_layernorm.weight")), qPrintable(stdErr));
        QVERIFY2(stdErr.contains(QStringLiteral("model.norm.weight: missing")), qPrintable(stdErr));
        QCOMPARE(test::runTessera(QStringList(base) << QStringLiteral("--ignore_missing_params")
                                                    << QStringLiteral("final_layernorm|^model\\.norm"),
                                  &stdOut, &stdErr),
                 0);
    }

    void moeExpertsQwen3Moe()
    {
        const std::string config = std::string(R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
            "num_experts": 4, "moe_intermediate_size": 2, "intermediate_size": 8, )") + kMoeSizes + "}";
        const MoeCheckpoint c = writeMoe(config, true);
        std::size_t count = 0;
        auto merged = mergeAndRead(c.actor, &count);
        // embed, norm, lm_head + per layer: q, k, v, o, q_norm, k_norm, 2 norms, router, 4 × 3 expert weights.
        QCOMPARE(count, std::size_t(3 + 2 * (9 + 12)));
        for (int l = 0; l < 2; ++l) {
            const std::string m = "decoder.layers." + std::to_string(l) + ".";
            const std::string h = "model.layers." + std::to_string(l) + ".";
            QCOMPARE(merged[h + "mlp.gate.weight"], c.global.at(m + "mlp.router.weight"));
            QCOMPARE(merged[h + "self_attn.q_norm.weight"], c.global.at(m + "self_attention.q_layernorm.weight"));
            QCOMPARE(merged[h + "post_attention_layernorm.weight"], c.global.at(m + "pre_mlp_layernorm.weight"));
            for (int e = 0; e < 4; ++e) {
                const std::string me = m + "mlp.experts.local_experts." + std::to_string(e) + ".";
                const std::string he = h + "mlp.experts." + std::to_string(e) + ".";
                const Values& fc1 = c.global.at(me + "linear_fc1.weight");
                QCOMPARE(merged[he + "gate_proj.weight"], rows(fc1, 4, 0, 2));
                QCOMPARE(merged[he + "up_proj.weight"], rows(fc1, 4, 2, 2));
                QCOMPARE(merged[he + "down_proj.weight"], c.global.at(me + "linear_fc2.weight"));
            }
        }
        QCOMPARE(merged["lm_head.weight"], rows(c.global.at("output_layer.weight"), 4, 0, 6));
    }

    void moeExpertsMixtral()
    {
        const std::string config = std::string(R"({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
            "num_local_experts": 4, "intermediate_size": 2, )") + kMoeSizes + "}";
        const MoeCheckpoint c = writeMoe(config, false);
        std::size_t count = 0;
        auto merged = mergeAndRead(c.actor, &count);
        QCOMPARE(count, std::size_t(3 + 2 * (7 + 12))); // no q/k norms
        for (int l = 0; l < 2; ++l) {
            const std::string m = "decoder.layers." + std::to_string(l) + ".";
            const std::string h = "model.layers." + std::to_string(l) + ".block_sparse_moe.";
            QCOMPARE(merged[h + "gate.weight"], c.global.at(m + "mlp.router.weight"));
            for (int e = 0; e < 4; ++e) {
                const std::string me = m + "mlp.experts.local_experts." + std::to_string(e) + ".";
                const std::string he = h + "experts." + std::to_string(e) + ".";
                const Values& fc1 = c.global.at(me + "linear_fc1.weight");
                QCOMPARE(merged[he + "w1.weight"], rows(fc1, 4, 0, 2));
                QCOMPARE(merged[he + "w3.weight"], rows(fc1, 4, 2, 2));
                QCOMPARE(merged[he + "w2.weight"], c.global.at(me + "linear_fc2.weight"));
            }
        }
        // Attention is split by query group whatever the MoE naming.
        const Values& qkv = c.global.at("decoder.layers.1.self_attention.linear_qkv.weight");
        Values k = rows(qkv, 4, 4, 2);
        const Values k1 = rows(qkv, 4, 12, 2);
        k.insert(k.end(), k1.begin(), k1.end());
        QCOMPARE(merged["model.layers.1.self_attn.k_proj.weight"], k);
    }
};

QTEST_GUILESS_MAIN(TestMegatronMerge)
#include "tst_megatron_merge.moc"
