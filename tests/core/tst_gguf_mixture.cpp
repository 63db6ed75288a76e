// SPDX-License-Identifier: GPL-3.0-or-later
// llama.cpp's quantization mixtures (formats/gguf_mixture.h), case by case as src/llama-quant.cpp states them, on
// models the shared fixtures are too small to show: 32 and 80 layers, grouped-query attention, eight experts, tied
// embeddings, rows that are not whole super-blocks. tst_gguf_quantize_llama checks whole files against llama.cpp.

#include "formats/gguf_mixture.h"

#include <QtTest>

using namespace tessera;

namespace {

/// A dense llama-like model's tensors in file order, every matrix `width` wide.
std::vector<GgufMixtureTensor> denseModel(int layers, std::uint64_t width, bool withOutput)
{
    std::vector<GgufMixtureTensor> t;
    t.push_back({ "token_embd.weight", { width, 1000 }, GgmlType::F32 });
    for (int i = 0; i < layers; ++i) {
        const std::string blk = "blk." + std::to_string(i) + ".";
        for (const char* name : { "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                  "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight" })
            t.push_back({ blk + name, { width, width }, GgmlType::F32 });
        t.push_back({ blk + "attn_norm.weight", { width }, GgmlType::F32 });
        t.push_back({ blk + "attn_q.bias", { width }, GgmlType::F32 });
    }
    t.push_back({ "output_norm.weight", { width }, GgmlType::F32 });
    if (withOutput)
        t.push_back({ "output.weight", { width, 1000 }, GgmlType::F32 });
    return t;
}

std::map<std::string, GgmlType> mixture(const char* outType, const GgufMixtureModel& model,
                                        const std::vector<GgufMixtureTensor>& tensors)
{
    auto type = ggufOutTypeFromName(outType);
    auto choices = ggufMixtureTypes(ggufOutType(*type), model, tensors);
    if (!choices)
        qFatal("%s", choices.error().message.c_str());
    std::map<std::string, GgmlType> byName;
    for (std::size_t k = 0; k < tensors.size(); ++k)
        byName[tensors[k].name] = (*choices)[k].type;
    return byName;
}

std::string blk(int i, const char* name) { return "blk." + std::to_string(i) + "." + name; }

} // namespace

class TestGgufMixture : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void q4KMGivesHalfTheLayersSixBits()
    {
        const GgufMixtureModel model { "llama", 32, 32, 8, 0 };
        const auto m = mixture("q4_k_m", model, denseModel(32, 4096, true));
        // use_more_bits over 32 layers: 0–3, 28–31, and every third from 6.
        for (int i = 0; i < 32; ++i) {
            const bool more = i < 4 || i >= 28 || (i - 4) % 3 == 2;
            QCOMPARE(m.at(blk(i, "attn_v.weight")), more ? GgmlType::Q6_K : GgmlType::Q4_K);
            QCOMPARE(m.at(blk(i, "ffn_down.weight")), more ? GgmlType::Q6_K : GgmlType::Q4_K);
            QCOMPARE(m.at(blk(i, "attn_q.weight")), GgmlType::Q4_K);
            QCOMPARE(m.at(blk(i, "ffn_up.weight")), GgmlType::Q4_K);
            QCOMPARE(m.at(blk(i, "attn_norm.weight")), GgmlType::F32);
            QCOMPARE(m.at(blk(i, "attn_q.bias")), GgmlType::F32);
        }
        QCOMPARE(m.at("output.weight"), GgmlType::Q6_K);
        QCOMPARE(m.at("token_embd.weight"), GgmlType::Q4_K);
        QCOMPARE(m.at("output_norm.weight"), GgmlType::F32);
    }

    void tiedEmbeddingTakesTheOutputRule()
    {
        const GgufMixtureModel model { "qwen2", 4, 4, 2, 0 };
        QCOMPARE(mixture("q4_k_m", model, denseModel(4, 256, false)).at("token_embd.weight"), GgmlType::Q6_K);
        QCOMPARE(mixture("q4_0", model, denseModel(4, 256, false)).at("token_embd.weight"), GgmlType::Q6_K);
        QCOMPARE(mixture("q8_0", model, denseModel(4, 256, false)).at("token_embd.weight"), GgmlType::Q8_0);
        // Rows that are not whole blocks of the mixture's type: Q8_0 (then F16 when not whole Q8_0 blocks either).
        QCOMPARE(mixture("q4_k_m", model, denseModel(4, 128, false)).at("token_embd.weight"), GgmlType::Q8_0);
        QCOMPARE(mixture("q4_k_m", model, denseModel(4, 48, false)).at("token_embd.weight"), GgmlType::F16);
        // A q4_0 head of rows that are whole Q4_0 blocks but not super-blocks: Q6_K falls back to Q8_0.
        QCOMPARE(mixture("q4_0", model, denseModel(4, 128, true)).at("output.weight"), GgmlType::Q8_0);
    }

    void fallbacksFollowTheChain()
    {
        const GgufMixtureModel model { "llama", 2, 4, 2, 0 };
        const auto t = denseModel(2, 128, true);
        auto m = mixture("q4_k_m", model, t);
        QCOMPARE(m.at(blk(0, "attn_q.weight")), GgmlType::Q5_0);  // Q4_K → Q5_0
        QCOMPARE(m.at(blk(1, "attn_v.weight")), GgmlType::Q8_0);  // Q6_K → Q8_0
        QCOMPARE(mixture("q5_k_s", model, t).at(blk(0, "attn_q.weight")), GgmlType::Q5_1);
        QCOMPARE(mixture("q2_k", model, t).at(blk(0, "attn_q.weight")), GgmlType::Q4_0);
        QCOMPARE(mixture("q3_k_m", model, t).at(blk(0, "attn_q.weight")), GgmlType::Q4_0);
        QCOMPARE(mixture("q4_0", model, denseModel(2, 48, true)).at(blk(0, "attn_q.weight")), GgmlType::F16);
        auto choices = ggufMixtureTypes(ggufOutType(GgufOutType::Q4_K_M), model, t);
        QVERIFY(choices);
        QVERIFY((*choices)[1].fellBack);
    }

    void lowBitMixtures()
    {
        const GgufMixtureModel gqa8 { "llama", 32, 32, 4, 0 }, gqa2 { "llama", 32, 8, 4, 0 };
        const auto t = denseModel(32, 4096, true);
        auto q2 = mixture("q2_k", gqa8, t);
        QCOMPARE(q2.at(blk(5, "attn_v.weight")), GgmlType::Q4_K);   // n_gqa ≥ 4
        QCOMPARE(mixture("q2_k", gqa2, t).at(blk(5, "attn_v.weight")), GgmlType::Q3_K);
        QCOMPARE(q2.at(blk(5, "ffn_down.weight")), GgmlType::Q3_K);
        QCOMPARE(q2.at(blk(5, "attn_output.weight")), GgmlType::Q3_K);
        QCOMPARE(q2.at(blk(5, "ffn_up.weight")), GgmlType::Q2_K);
        auto q3 = mixture("q3_k_m", gqa8, t);
        QCOMPARE(q3.at(blk(0, "attn_v.weight")), GgmlType::Q5_K);
        QCOMPARE(q3.at(blk(1, "attn_v.weight")), GgmlType::Q5_K);
        QCOMPARE(q3.at(blk(2, "attn_v.weight")), GgmlType::Q4_K);
        QCOMPARE(q3.at(blk(1, "ffn_down.weight")), GgmlType::Q5_K); // i < 32/16
        QCOMPARE(q3.at(blk(2, "ffn_down.weight")), GgmlType::Q4_K);
        QCOMPARE(q3.at(blk(2, "attn_output.weight")), GgmlType::Q4_K);
        QCOMPARE(q3.at(blk(2, "attn_k.weight")), GgmlType::Q3_K);
        auto q4s = mixture("q4_k_s", gqa8, t);
        QCOMPARE(q4s.at(blk(3, "attn_v.weight")), GgmlType::Q5_K);
        QCOMPARE(q4s.at(blk(4, "attn_v.weight")), GgmlType::Q4_K);
        QCOMPARE(q4s.at(blk(3, "ffn_down.weight")), GgmlType::Q5_K); // i < 32/8
        QCOMPARE(q4s.at(blk(4, "ffn_down.weight")), GgmlType::Q4_K);
        auto q5s = mixture("q5_k_s", gqa8, t);
        QCOMPARE(q5s.at(blk(0, "attn_v.weight")), GgmlType::Q5_K);
        QCOMPARE(mixture("q6_k", gqa8, t).at(blk(0, "attn_v.weight")), GgmlType::Q6_K);
        QCOMPARE(mixture("q5_k_m", gqa8, t).at(blk(31, "ffn_down.weight")), GgmlType::Q6_K);
        QCOMPARE(mixture("q4_1", gqa8, t).at(blk(31, "ffn_down.weight")), GgmlType::Q4_1);
        QCOMPARE(mixture("q4_1", gqa8, t).at("output.weight"), GgmlType::Q6_K);
    }

    void seventyBGivesAttnVMoreBits()
    {
        const auto t = denseModel(80, 8192, true);
        const GgufMixtureModel llama70 { "llama", 80, 64, 8, 0 }, llama65 { "llama", 80, 64, 64, 0 };
        QCOMPARE(mixture("q4_k_m", llama70, t).at(blk(10, "attn_v.weight")), GgmlType::Q5_K);
        QCOMPARE(mixture("q4_k_m", llama65, t).at(blk(10, "attn_v.weight")), GgmlType::Q4_K);
        QCOMPARE(mixture("q4_k_m", { "qwen2", 80, 64, 8, 0 }, t).at(blk(10, "attn_v.weight")), GgmlType::Q5_K);
        QCOMPARE(mixture("q4_k_m", { "qwen3", 80, 64, 8, 0 }, t).at(blk(10, "attn_v.weight")), GgmlType::Q4_K);
    }

    void eightExpertsKeepAttentionAtEightBits()
    {
        std::vector<GgufMixtureTensor> t;
        for (int i = 0; i < 4; ++i) {
            for (const char* name : { "attn_k.weight", "attn_v.weight", "attn_output.weight" })
                t.push_back({ blk(i, name), { 4096, 4096 }, GgmlType::F32 });
            t.push_back({ blk(i, "ffn_gate_inp.weight"), { 4096, 8 }, GgmlType::F32 });
            t.push_back({ blk(i, "ffn_down_exps.weight"), { 14336, 4096, 8 }, GgmlType::F32 });
            t.push_back({ blk(i, "ffn_up_exps.weight"), { 4096, 14336, 8 }, GgmlType::F32 });
        }
        const auto m = mixture("q4_k_m", { "llama", 4, 32, 8, 8 }, t);
        QCOMPARE(m.at(blk(1, "attn_v.weight")), GgmlType::Q8_0);
        QCOMPARE(m.at(blk(1, "attn_k.weight")), GgmlType::Q8_0);
        QCOMPARE(m.at(blk(1, "attn_output.weight")), GgmlType::Q5_K);
        QCOMPARE(m.at(blk(1, "ffn_gate_inp.weight")), GgmlType::F32);
        // The layer comes from the name: use_more_bits(i, 4) holds for 2 and 3 only.
        QCOMPARE(m.at(blk(0, "ffn_down_exps.weight")), GgmlType::Q4_K);
        QCOMPARE(m.at(blk(1, "ffn_down_exps.weight")), GgmlType::Q4_K);
        QCOMPARE(m.at(blk(2, "ffn_down_exps.weight")), GgmlType::Q6_K);
        QCOMPARE(m.at(blk(3, "ffn_down_exps.weight")), GgmlType::Q6_K);
        QCOMPARE(m.at(blk(1, "ffn_up_exps.weight")), GgmlType::Q4_K);
        // A layer the model does not have is llama.cpp's error too.
        t.push_back({ blk(9, "ffn_down_exps.weight"), { 14336, 4096, 8 }, GgmlType::F32 });
        QVERIFY(!ggufMixtureTypes(ggufOutType(GgufOutType::Q4_K_M), { "llama", 4, 32, 8, 8 }, t));
    }

    void countersFollowTheQuantizersOrder()
    {
        // The file lists layer 10 before layer 2; the quantizer counts attn_v tensors by layer number (then name),
        // so use_more_bits sees 0, 1, 2, … whatever the file's order.
        std::vector<GgufMixtureTensor> t;
        for (int i : { 10, 2, 0, 1, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15 })
            t.push_back({ blk(i, "attn_v.weight"), { 256, 256 }, GgmlType::F32 });
        const auto m = mixture("q4_k_m", { "llama", 16, 4, 1, 0 }, t);
        for (int i = 0; i < 16; ++i) {
            const bool more = i < 2 || i >= 14 || (i - 2) % 3 == 2;
            QCOMPARE(m.at(blk(i, "attn_v.weight")), more ? GgmlType::Q6_K : GgmlType::Q4_K);
        }
    }

    void oneRowMatricesAreVectors()
    {
        // ggml counts dimensions up to the last one above 1: a [256, 1] tensor is not quantized.
        const std::vector<GgufMixtureTensor> t = { { blk(0, "ffn_gate_inp_shexp.weight"), { 256, 1 }, GgmlType::F32 },
                                                   { blk(0, "ffn_up_shexp.weight"), { 256, 2 }, GgmlType::F32 } };
        const auto m = mixture("q4_k_m", { "qwen2moe", 1, 4, 2, 4 }, t);
        QCOMPARE(m.at(blk(0, "ffn_gate_inp_shexp.weight")), GgmlType::F32);
        QCOMPARE(m.at(blk(0, "ffn_up_shexp.weight")), GgmlType::Q4_K);
    }

    void plainTypesAreRefused()
    {
        QVERIFY(!ggufMixtureTypes(ggufOutType(GgufOutType::F16), { "llama", 1, 1, 1, 0 }, {}));
    }
};

QTEST_GUILESS_MAIN(TestGgufMixture)
#include "tst_gguf_mixture.moc"
