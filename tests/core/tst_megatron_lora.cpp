// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron LoRA: a 2-layer llama in verl's legacy per-rank layout, TP 2, with Megatron-Bridge's adapters
// (`<linear>.adapter.linear_in/linear_out.weight`) on linear_qkv, linear_proj, linear_fc1 and linear_fc2, each
// factor split over the TP ranks as ParallelLinearAdapter splits it. Its factors must come out under PEFT's
// names with B re-indexed exactly like the weight it adapts, and the merge must fuse them.

#include "testutil.h"

#include "formats/safetensors_reader.h"
#include "formats/scan.h"
#include "mapping/lora.h"
#include "mapping/megatron_mapping.h"
#include "megatronvalues.h"
#include "pickle/torch_save_writer.h"

#include <QTest>

#include <cstdio>
#include <filesystem>
#include <map>

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kRank = 2;

struct Checkpoint {
    std::string actor;
    std::map<std::string, Values> global; ///< by global Megatron name
    std::map<std::string, Shape> shapes;
};

/// The weight's first kRank columns: what every B factor is made of here, so that a mapped B must equal the
/// first columns of the mapped weight it adapts, whatever the transform re-indexed.
Values firstColumns(const Values& w, const Shape& shape)
{
    Values out;
    for (std::int64_t i = 0; i < shape[0]; ++i)
        for (std::int64_t k = 0; k < kRank; ++k)
            out.push_back(w[static_cast<std::size_t>(i * shape[1] + k)]);
    return out;
}

Checkpoint writeLlamaWithAdapters()
{
    Checkpoint c;
    c.actor = makeTempDir() + "/actor";
    fs::create_directories(c.actor + "/huggingface");
    writeFile(c.actor + "/huggingface/config.json",
              R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4,
                  "intermediate_size": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 2,
                  "num_hidden_layers": 2, "vocab_size": 6, "tie_word_embeddings": false, "torch_dtype": "bfloat16"})");
    writeFile(c.actor + "/transformer_config.json",
              R"({"num_layers": 2, "hidden_size": 4, "ffn_hidden_size": 4, "num_attention_heads": 4,
                  "num_query_groups": 2, "kv_channels": 2, "tensor_model_parallel_size": 2,
                  "pipeline_model_parallel_size": 1, "gated_linear_unit": true})");
    writeFile(c.actor + "/lora_train_meta.json", R"({"r": 2, "lora_alpha": 4, "task_type": "CAUSAL_LM"})");
    struct Param {
        std::string name;
        Shape shape;
        Split split;
        std::string bOf; ///< for a B factor: the weight whose first columns it holds
    };
    std::vector<Param> params;
    params.push_back({ "embedding.word_embeddings.weight", { 8, 4 }, Split::Rows, {} });
    for (int l = 0; l < 2; ++l) {
        const std::string p = "decoder.layers." + std::to_string(l) + ".";
        params.push_back({ p + "self_attention.linear_qkv.layer_norm_weight", { 4 }, Split::Replicated, {} });
        params.push_back({ p + "mlp.linear_fc1.layer_norm_weight", { 4 }, Split::Replicated, {} });
        // (linear, weight shape, weight split, A split, B split)
        const struct {
            const char* linear;
            Shape shape;
            Split weight, a, b;
        } linears[] = {
            { "self_attention.linear_qkv", { 16, 4 }, Split::Rows, Split::Rows, Split::Rows },
            { "self_attention.linear_proj", { 4, 8 }, Split::Columns, Split::Columns, Split::Rows },
            { "mlp.linear_fc1", { 8, 4 }, Split::Glu, Split::Rows, Split::Glu },
            { "mlp.linear_fc2", { 4, 4 }, Split::Columns, Split::Columns, Split::Rows },
        };
        for (const auto& x : linears) {
            const std::string w = p + x.linear + ".weight";
            params.push_back({ w, x.shape, x.weight, {} });
            params.push_back({ p + x.linear + ".adapter.linear_in.weight", { kRank, x.shape[1] }, x.a, {} });
            params.push_back({ p + x.linear + ".adapter.linear_out.weight", { x.shape[0], kRank }, x.b, w });
        }
    }
    params.push_back({ "decoder.final_layernorm.weight", { 4 }, Split::Replicated, {} });
    params.push_back({ "output_layer.weight", { 8, 4 }, Split::Rows, {} });
    // Small distinct bf16 values (k/64), so fused sums stay exact enough to compare.
    std::uint16_t next = 1;
    for (const auto& p : params) {
        if (!p.bOf.empty())
            continue;
        std::int64_t n = 1;
        for (auto d : p.shape)
            n *= d;
        Values v(static_cast<std::size_t>(n));
        for (auto& x : v)
            x = floatToBf16(static_cast<float>(next++ % 97) / 64.0f - 0.75f);
        c.global[p.name] = v;
        c.shapes[p.name] = p.shape;
    }
    for (const auto& p : params)
        if (!p.bOf.empty()) {
            c.global[p.name] = firstColumns(c.global[p.bOf], c.shapes[p.bOf]);
            c.shapes[p.name] = p.shape;
        }
    const int tp = 2;
    for (int r = 0; r < tp; ++r) {
        std::vector<TorchSaveTensor> specs;
        std::vector<Values> data;
        for (const auto& p : params) {
            Shape local;
            data.push_back(localSlice(c.global[p.name], p.shape, p.split, r, tp, local));
            TorchSaveTensor t;
            t.name = p.name;
            t.dtype = DType::BFloat16;
            t.shape = local;
            specs.push_back(t);
        }
        char folder[64];
        std::snprintf(folder, sizeof folder, "/model/mp_rank_%02d_000", r);
        fs::create_directories(c.actor + folder);
        writeRankFile(c.actor + folder + "/model.pt", specs, data);
    }
    return c;
}

std::vector<float> floats(const Values& v)
{
    std::vector<float> out;
    for (auto x : v)
        out.push_back(bf16ToFloat(x));
    return out;
}

} // namespace

class TestMegatronLora : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void factorsMapToPeftNamesLikeTheirWeights()
    {
        const Checkpoint c = writeLlamaWithAdapters();
        auto info = scanCheckpoint(c.actor);
        QVERIFY_RESULT(info);
        QVERIFY2(info->problems.empty(), info->problems.empty() ? "" : info->problems.front().text().c_str());
        auto mapped = mapMegatronToHf(*info, {});
        QVERIFY_RESULT(mapped);
        std::string problems;
        for (const auto& p : mapped->mapped.problems)
            problems += p.text() + "\n";
        QVERIFY2(problems.empty(), problems.c_str());

        std::map<std::string, const TensorInfo*> byName;
        for (const auto& t : mapped->mapped.tensors)
            byName[t.name] = &t;
        const char* modules[] = { "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                  "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj" };
        const char* linearOf[] = { "self_attention.linear_qkv", "self_attention.linear_qkv", "self_attention.linear_qkv",
                                   "self_attention.linear_proj", "mlp.linear_fc1", "mlp.linear_fc1", "mlp.linear_fc2" };
        for (int l = 0; l < 2; ++l)
            for (std::size_t m = 0; m < std::size(modules); ++m) {
                const std::string hf = "model.layers." + std::to_string(l) + "." + modules[m];
                const std::string peft = "base_model.model." + hf;
                QVERIFY2(byName.count(hf + ".weight"), hf.c_str());
                QVERIFY2(byName.count(peft + ".lora_A.weight") && byName.count(peft + ".lora_B.weight"), peft.c_str());
                const TensorInfo& w = *byName[hf + ".weight"];
                // B went through the weight's own re-indexing: it is the mapped weight's first columns.
                QCOMPARE(materialize(*byName[peft + ".lora_B.weight"]), firstColumns(materialize(w), w.shape));
                // A is the adapter's whole linear_in, for every output of the fused linear.
                const std::string a = "decoder.layers." + std::to_string(l) + "." + linearOf[m] + ".adapter.linear_in.weight";
                QCOMPARE(materialize(*byName[peft + ".lora_A.weight"]), c.global.at(a));
            }
    }

    void mergeFusesAndExportsTheAdapter()
    {
        const Checkpoint c = writeLlamaWithAdapters();
        const std::string out = makeTempDir() + "/merged";
        QString stdOut, stdErr;
        QCOMPARE(runTessera({ QStringLiteral("merge"), QStringLiteral("--backend"), QStringLiteral("megatron"),
                              QStringLiteral("--local_dir"), QString::fromStdString(c.actor), QStringLiteral("--target_dir"),
                              QString::fromStdString(out) },
                            &stdOut, &stdErr),
                 0);
        QVERIFY2(stdOut.contains(QStringLiteral("14 weights fused")), qPrintable(stdOut + stdErr));
        // inspect names the adapter under its mapped names.
        QCOMPARE(runTessera({ QStringLiteral("inspect"), QString::fromStdString(c.actor) }, &stdOut, &stdErr), 0);
        QVERIFY2(stdOut.contains(QStringLiteral("LoRA        adapter: 14 modules")), qPrintable(stdOut));
        auto adapter = scanSafetensorsFolder(out + "/lora_adapter");
        QVERIFY_RESULT(adapter);
        QCOMPARE(adapter->tensors.size(), std::size_t(28));

        // One fused weight by hand: o_proj of layer 1 = W + (B·A)·alpha/r, rounded once to bf16.
        auto merged = scanSafetensorsFolder(out);
        QVERIFY_RESULT(merged);
        const std::string l1 = "decoder.layers.1.self_attention.linear_proj.";
        const auto w = floats(c.global.at(l1 + "weight"));
        const auto a = floats(c.global.at(l1 + "adapter.linear_in.weight"));
        const auto b = floats(c.global.at(l1 + "adapter.linear_out.weight"));
        Values expected;
        for (std::int64_t i = 0; i < 4; ++i)
            for (std::int64_t j = 0; j < 8; ++j) {
                double dot = 0;
                for (std::int64_t k = 0; k < kRank; ++k)
                    dot += static_cast<double>(b[i * kRank + k]) * a[k * 8 + j];
                expected.push_back(floatToBf16(w[i * 8 + j] + static_cast<float>(dot) * 2.0f));
            }
        const TensorInfo* fused = merged->find("model.layers.1.self_attn.o_proj.weight");
        QVERIFY(fused);
        QCOMPARE(materialize(*fused), expected);
    }
};

QTEST_GUILESS_MAIN(TestMegatronLora)
#include "tst_megatron_lora.moc"
