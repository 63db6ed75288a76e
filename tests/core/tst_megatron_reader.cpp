// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron readers: verl's legacy per-rank folders and torch_dist. The fixtures' Hugging Face references pin the
// placement of every TP piece and the global layer numbers bit for bit; damaged copies check the problems.

#include "testutil.h"
#include "hostilefiles.h"

#include "model/checkpoint_report.h"
#include "io/mapped_file.h"
#include "formats/megatron_config.h"
#include "formats/megatron_names.h"
#include "formats/safetensors_reader.h"
#include "formats/scan.h"
#include "io/zip_archive.h"

#include <nlohmann/json.hpp>

#include <QTest>

#include <filesystem>
#include <fstream>
#include <map>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

const char* kLegacy = "megatron_legacy_qwen2_tp2_pp2";
const char* kDist = "megatron_dist_llama_tp2_pp2";

std::string allProblems(const CheckpointInfo& info)
{
    std::string s;
    for (const auto& p : info.problems)
        s += p.text() + "\n";
    return s;
}

/// The bytes of a whole tensor, row-major, assembled from its Primary pieces (read with plain file reads so the
/// test does not depend on the merge engine).
std::string assemble(const TensorInfo& tensor)
{
    const std::size_t elem = dtypeSize(tensor.dtype);
    std::string out(tensor.numel() * elem, '\0');
    const Shape strides = [&] {
        Shape s(tensor.shape.size(), 1);
        for (std::size_t d = s.size(); d-- > 1;)
            s[d - 1] = s[d] * tensor.shape[d];
        return s;
    }();
    for (const auto& piece : tensor.pieces) {
        if (piece.role != PieceRole::Primary)
            continue;
        std::ifstream in(piece.file, std::ios::binary);
        std::int64_t count = 1;
        for (auto n : piece.shape)
            count *= n;
        Shape index(piece.shape.size(), 0);
        for (std::int64_t i = 0; i < count; ++i) {
            std::int64_t src = 0, dst = 0;
            for (std::size_t d = 0; d < index.size(); ++d) {
                src += index[d] * piece.strides[d];
                dst += (piece.offsets[d] + index[d]) * strides[d];
            }
            in.seekg(static_cast<std::streamoff>(piece.dataOffset + static_cast<std::uint64_t>(src) * elem));
            in.read(&out[static_cast<std::size_t>(dst) * elem], static_cast<std::streamsize>(elem));
            for (std::size_t d = index.size(); d-- > 0;) {
                if (++index[d] < piece.shape[d])
                    break;
                index[d] = 0;
            }
        }
    }
    return out;
}

/// Rows [begin, end) of a row-major tensor's bytes whose rows are `rowBytes` long.
std::string rows(const std::string& bytes, std::size_t rowBytes, std::size_t begin, std::size_t end)
{
    return bytes.substr(begin * rowBytes, (end - begin) * rowBytes);
}

struct Reference {
    CheckpointInfo info;
    std::string bytes(const std::string& name) const
    {
        const TensorInfo* t = info.find(name);
        return t ? assemble(*t) : std::string();
    }
};

Reference reference(const char* fixtureName)
{
    auto ref = scanSafetensorsFolder(test::fixture(std::string(fixtureName) + "/reference"));
    if (!ref)
        qFatal("%s", ref.error().message.c_str());
    return { std::move(*ref) };
}

/// A writable copy of a fixture's actor folder.
std::string copyActor(const char* fixtureName)
{
    const std::string dest = test::makeTempDir() + "/actor";
    fs::copy(test::fixture(std::string(fixtureName) + "/global_step_10/actor"), dest, fs::copy_options::recursive);
    return dest;
}

bool hasProblem(const CheckpointInfo& info, const std::string& fileEnd, const std::string& text)
{
    for (const auto& p : info.problems)
        if (p.file.size() >= fileEnd.size() && p.file.compare(p.file.size() - fileEnd.size(), fileEnd.size(), fileEnd) == 0
            && p.message.find(text) != std::string::npos)
            return true;
    return false;
}

/// The per-layer tensors of both fixtures (Qwen2 adds the q/k/v bias).
std::map<std::string, Shape> expectedLayer(bool qkvBias)
{
    std::map<std::string, Shape> m {
        { "self_attention.linear_qkv.layer_norm_weight", { 64 } },
        { "self_attention.linear_qkv.weight", { 96, 64 } }, // (8 heads + 2·2 groups) · 8
        { "self_attention.linear_proj.weight", { 64, 64 } },
        { "mlp.linear_fc1.layer_norm_weight", { 64 } },
        { "mlp.linear_fc1.weight", { 352, 64 } },           // [gate; up] of ffn 176
        { "mlp.linear_fc2.weight", { 64, 176 } },
    };
    if (qkvBias)
        m["self_attention.linear_qkv.bias"] = { 96 };
    return m;
}


// --- Megatron-LM files made from the legacy fixture ----------------------------------------------------------
// No real model_optim_rng.pt is checked in, so the tests build one: the legacy fixture's pickle holds
// `[ {state dict} ]`; the same state dict opcodes wrapped in `{'args': Namespace(...), 'model': {...}}` and the
// same storage records give exactly what Megatron-LM's torch.save writes, minus optimizer and RNG state.

using test::putLe;
using test::zipStored;

std::string pickleStr(const std::string& s)
{
    std::string out = "X";
    putLe(out, s.size(), 4);
    return out + s;
}

/// Argparse Namespace(**values) as pickle opcodes; a negative value stands for None.
std::string pickleNamespace(const std::map<std::string, int>& values)
{
    std::string out = "cargparse\nNamespace\n)\x81}(";
    for (const auto& [key, value] : values) {
        out += pickleStr(key);
        if (value < 0) {
            out += "N";
        } else {
            out += "J";
            putLe(out, static_cast<std::uint32_t>(value), 4);
        }
    }
    return out + "ub";
}

/// Writes `dest` (a model_optim_rng.pt) from a legacy model.pt: `chunks` copies of its state dict under `model`
/// (chunks == 1) or `model0`, `model1`…, plus `args`.
void writeMegatronLm(const std::string& legacyModelPt, const std::string& dest, const std::map<std::string, int>& args,
                     int chunks)
{
    auto file = MappedFile::open(legacyModelPt);
    if (!file)
        qFatal("%s", file.error().message.c_str());
    auto zip = ZipArchive::open((*file)->view(), legacyModelPt);
    if (!zip)
        qFatal("%s", zip.error().message.c_str());
    std::vector<std::pair<std::string, std::string>> records;
    for (const auto& entry : zip->entries()) {
        auto bytes = zip->read(entry);
        if (!bytes)
            qFatal("%s", bytes.error().message.c_str());
        std::string data(bytes->asString());
        if (entry.name == zip->prefix() + "/data.pkl") {
            // PROTO 2, EMPTY_LIST, BINPUT 0, <dict …>, APPEND, STOP
            if (data.compare(0, 5, std::string("\x80\x02]q\x00", 5)) != 0 || data.compare(data.size() - 2, 2, "a.") != 0)
                qFatal("unexpected pickle framing in %s", legacyModelPt.c_str());
            const std::string dict = data.substr(5, data.size() - 7);
            std::string pkl = std::string("\x80\x02}(") + pickleStr("args") + pickleNamespace(args);
            for (int i = 0; i < chunks; ++i)
                pkl += pickleStr(chunks == 1 ? std::string("model") : "model" + std::to_string(i)) + dict;
            data = pkl + "u.";
        }
        records.emplace_back(entry.name, std::move(data));
    }
    test::writeFile(dest, zipStored(records));
}

/// A Megatron-LM iter folder made from the legacy fixture's four rank folders.
std::string megatronLmCopy(const std::map<std::string, int>& args, int chunks)
{
    // Nested so that no transformer_config.json of a parent folder (up to two levels are searched) can be found.
    const std::string dir = test::makeTempDir() + "/run/checkpoints/iter_0000010";
    const std::string source = test::fixture(std::string(kLegacy) + "/global_step_10/actor/model");
    for (const char* rank : { "mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_000", "mp_rank_01_001" }) {
        fs::create_directories(dir + "/" + rank);
        writeMegatronLm(source + "/" + rank + "/model.pt", dir + "/" + rank + "/model_optim_rng.pt", args, chunks);
    }
    return dir;
}

} // namespace

class TestMegatronReader : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void layerOffsets()
    {
        MegatronConfig c;
        c.numLayers.value = 4;
        c.pipelineParallel.value = 2;
        QCOMPARE(*megatronLayerOffset(c, 1, 0), std::int64_t(2));
        QCOMPARE(*megatronStageLayers(c, 1, 0), std::int64_t(2));
        // Interleaved: all stages of virtual stage 0 come first.
        c.numLayers.value = 8;
        c.virtualPipeline.value = 2;
        QCOMPARE(*megatronLayerOffset(c, 0, 0), std::int64_t(0));
        QCOMPARE(*megatronLayerOffset(c, 1, 0), std::int64_t(2));
        QCOMPARE(*megatronLayerOffset(c, 0, 1), std::int64_t(4));
        QCOMPARE(*megatronLayerOffset(c, 1, 1), std::int64_t(6));
        // Uneven first/last stages: 10 layers on 4 stages as 1 + 3 + 3 + 3.
        c = MegatronConfig();
        c.numLayers.value = 10;
        c.pipelineParallel.value = 4;
        c.firstStageLayers.value = 1;
        c.lastStageLayers.value = 3;
        const std::int64_t offsets[] = { 0, 1, 4, 7 };
        for (int pp = 0; pp < 4; ++pp) {
            QCOMPARE(*megatronLayerOffset(c, pp, 0), offsets[pp]);
            QCOMPARE(*megatronStageLayers(c, pp, 0), std::int64_t(pp == 0 ? 1 : 3));
        }
        QVERIFY(!megatronLayerOffset(MegatronConfig(), 0, 0));
    }

    void tpSplits()
    {
        QCOMPARE(megatronTpSplit("decoder.layers.0.self_attention.linear_qkv.weight", true), MegatronTpSplit::Rows);
        QCOMPARE(megatronTpSplit("decoder.layers.0.self_attention.linear_qkv.bias", true), MegatronTpSplit::Rows);
        QCOMPARE(megatronTpSplit("decoder.layers.0.self_attention.linear_qkv.layer_norm_weight", true),
                 MegatronTpSplit::Replicated);
        QCOMPARE(megatronTpSplit("decoder.layers.0.self_attention.linear_proj.weight", true), MegatronTpSplit::Columns);
        QCOMPARE(megatronTpSplit("decoder.layers.0.self_attention.linear_proj.bias", true), MegatronTpSplit::Replicated);
        QCOMPARE(megatronTpSplit("decoder.layers.0.mlp.linear_fc1.weight", true), MegatronTpSplit::GluRows);
        QCOMPARE(megatronTpSplit("decoder.layers.0.mlp.linear_fc1.weight", false), MegatronTpSplit::Rows);
        QCOMPARE(megatronTpSplit("decoder.layers.0.mlp.linear_fc2.weight", true), MegatronTpSplit::Columns);
        QCOMPARE(megatronTpSplit("decoder.layers.0.mlp.router.weight", true), MegatronTpSplit::Replicated);
        QCOMPARE(megatronTpSplit("decoder.layers.0.self_attention.q_layernorm.weight", true),
                 MegatronTpSplit::Replicated);
        QCOMPARE(megatronTpSplit("decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight", true),
                 MegatronTpSplit::Columns);
        QCOMPARE(megatronTpSplit("embedding.word_embeddings.weight", true), MegatronTpSplit::Rows);
        QCOMPARE(megatronTpSplit("output_layer.weight", true), MegatronTpSplit::Rows);
        QCOMPARE(megatronTpSplit("decoder.final_layernorm.weight", true), MegatronTpSplit::Replicated);

        auto layer = parseMegatronLayerName("decoder.layers.12.mlp.experts.local_experts.3.linear_fc1.weight");
        QVERIFY(layer);
        QCOMPARE(layer->layer, std::int64_t(12));
        auto expert = parseMegatronExpertName(layer->rest);
        QVERIFY(expert);
        QCOMPARE(expert->expert, std::int64_t(3));
        QCOMPARE(QString::fromStdString(expert->before + "7" + expert->after),
                 QStringLiteral("mlp.experts.local_experts.7.linear_fc1.weight"));
        auto grouped = parseMegatronExpertName("mlp.experts.linear_fc2.weight5");
        QVERIFY(grouped);
        QCOMPARE(grouped->expert, std::int64_t(5));
        QVERIFY(!parseMegatronExpertName("mlp.shared_experts.linear_fc1.weight"));
        QVERIFY(!parseMegatronLayerName("embedding.word_embeddings.weight"));
    }

    void legacyTensorList()
    {
        auto info = scanCheckpoint(test::fixture(kLegacy));
        QVERIFY_RESULT(info);
        QCOMPARE(QString::fromStdString(info->layout), QStringLiteral("megatron-legacy"));
        QVERIFY2(info->problems.empty(), allProblems(*info).c_str());
        QCOMPARE(info->parallel.tensorParallel, 2);
        QCOMPARE(info->parallel.pipelineParallel, 2);
        QCOMPARE(info->parallel.virtualPipeline, 1);
        QCOMPARE(info->parallel.expertParallel, 1);
        QCOMPARE(info->parallel.worldSize, 4);
        QCOMPARE(info->files.size(), std::size_t(4));
        QVERIFY(info->hfConfigDir.find("hf_config_and_tokenizer") != std::string::npos);

        std::map<std::string, std::string> expected {
            { "embedding.word_embeddings.weight", "[512, 64]" }, // vocab 500 padded to 512
            { "decoder.final_layernorm.weight", "[64]" },
            { "output_layer.weight", "[512, 64]" },
        };
        for (int layer = 0; layer < 4; ++layer)
            for (const auto& [rest, shape] : expectedLayer(true))
                expected["decoder.layers." + std::to_string(layer) + "." + rest] = shapeToString(shape);
        std::map<std::string, std::string> actual;
        for (const auto& t : info->tensors) {
            actual[t.name] = shapeToString(t.shape);
            QCOMPARE(t.dtype, DType::BFloat16);
        }
        QCOMPARE(actual, expected);

        // TP pieces: two ranks per split tensor, the GLU weight two boxes per rank, norms once plus a replica.
        const TensorInfo* fc1 = info->find("decoder.layers.3.mlp.linear_fc1.weight");
        QCOMPARE(fc1->pieces.size(), std::size_t(4));
        const TensorInfo* norm = info->find("decoder.layers.2.self_attention.linear_qkv.layer_norm_weight");
        QCOMPARE(norm->pieces.size(), std::size_t(2));
        QCOMPARE(norm->pieces[0].role, PieceRole::Primary);
        QCOMPARE(norm->pieces[1].role, PieceRole::Replica);
        // Layers 2 and 3 come from pipeline stage 1.
        QVERIFY(norm->pieces[0].file.find("mp_rank_00_001") != std::string::npos);
    }

    void legacyMatchesReference()
    {
        auto info = scanCheckpoint(test::fixture(kLegacy));
        QVERIFY_RESULT(info);
        const Reference ref = reference(kLegacy);
        const std::size_t row = 64 * 2; // hidden 64, bf16
        auto bytes = [&](const std::string& name) {
            const TensorInfo* t = info->find(name);
            return t ? assemble(*t) : std::string("missing ") + name;
        };
        QVERIFY(rows(bytes("embedding.word_embeddings.weight"), row, 0, 500) == ref.bytes("model.embed_tokens.weight"));
        QVERIFY(rows(bytes("output_layer.weight"), row, 0, 500) == ref.bytes("lm_head.weight"));
        QVERIFY(bytes("decoder.final_layernorm.weight") == ref.bytes("model.norm.weight"));
        for (int layer = 0; layer < 4; ++layer) {
            const std::string m = "decoder.layers." + std::to_string(layer) + ".";
            const std::string h = "model.layers." + std::to_string(layer) + ".";
            QVERIFY(bytes(m + "mlp.linear_fc1.weight")
                    == ref.bytes(h + "mlp.gate_proj.weight") + ref.bytes(h + "mlp.up_proj.weight"));
            QVERIFY(bytes(m + "mlp.linear_fc2.weight") == ref.bytes(h + "mlp.down_proj.weight"));
            QVERIFY(bytes(m + "self_attention.linear_proj.weight") == ref.bytes(h + "self_attn.o_proj.weight"));
            QVERIFY(bytes(m + "self_attention.linear_qkv.layer_norm_weight") == ref.bytes(h + "input_layernorm.weight"));
            QVERIFY(bytes(m + "mlp.linear_fc1.layer_norm_weight") == ref.bytes(h + "post_attention_layernorm.weight"));
            // linear_qkv is grouped per query group: [q (4 heads × 8 rows), k (8), v (8)] × 2 groups.
            const std::string qkv = bytes(m + "self_attention.linear_qkv.weight");
            const std::string bias = bytes(m + "self_attention.linear_qkv.bias");
            std::string q, k, v, qb, kb, vb;
            for (std::size_t g = 0; g < 2; ++g) {
                q += rows(qkv, row, g * 48, g * 48 + 32);
                k += rows(qkv, row, g * 48 + 32, g * 48 + 40);
                v += rows(qkv, row, g * 48 + 40, g * 48 + 48);
                qb += rows(bias, 2, g * 48, g * 48 + 32);
                kb += rows(bias, 2, g * 48 + 32, g * 48 + 40);
                vb += rows(bias, 2, g * 48 + 40, g * 48 + 48);
            }
            QVERIFY(q == ref.bytes(h + "self_attn.q_proj.weight"));
            QVERIFY(k == ref.bytes(h + "self_attn.k_proj.weight"));
            QVERIFY(v == ref.bytes(h + "self_attn.v_proj.weight"));
            QVERIFY(qb == ref.bytes(h + "self_attn.q_proj.bias"));
            QVERIFY(kb == ref.bytes(h + "self_attn.k_proj.bias"));
            QVERIFY(vb == ref.bytes(h + "self_attn.v_proj.bias"));
        }
    }

    void distTensorList()
    {
        auto info = scanCheckpoint(test::fixture(kDist));
        QVERIFY_RESULT(info);
        QCOMPARE(QString::fromStdString(info->layout), QStringLiteral("megatron-dist"));
        QVERIFY2(info->problems.empty(), allProblems(*info).c_str());
        QCOMPARE(info->parallel.tensorParallel, 2);
        QCOMPARE(info->parallel.pipelineParallel, 2);
        QCOMPARE(QString::fromStdString(info->notes["sharded_backend"]), QStringLiteral("torch_dist"));
        std::map<std::string, std::string> expected {
            { "embedding.word_embeddings.weight", "[512, 64]" },
            { "decoder.final_layernorm.weight", "[64]" },
            { "output_layer.weight", "[512, 64]" },
        };
        for (const auto& [rest, shape] : expectedLayer(false)) {
            Shape stacked { 4 };
            stacked.insert(stacked.end(), shape.begin(), shape.end());
            expected["decoder.layers." + rest] = shapeToString(stacked);
        }
        std::map<std::string, std::string> actual;
        for (const auto& t : info->tensors)
            actual[t.name] = shapeToString(t.shape);
        QCOMPARE(actual, expected);
    }

    void distMatchesReference()
    {
        auto info = scanCheckpoint(test::fixture(kDist));
        QVERIFY_RESULT(info);
        const Reference ref = reference(kDist);
        const TensorInfo* fc1 = info->find("decoder.layers.mlp.linear_fc1.weight");
        QVERIFY(fc1);
        const std::string all = assemble(*fc1);
        const std::size_t layerBytes = 352 * 64 * 2;
        for (int layer = 0; layer < 4; ++layer) {
            const std::string h = "model.layers." + std::to_string(layer) + ".";
            QVERIFY(all.substr(static_cast<std::size_t>(layer) * layerBytes, layerBytes)
                    == ref.bytes(h + "mlp.gate_proj.weight") + ref.bytes(h + "mlp.up_proj.weight"));
        }
    }

    void missingRankFolder()
    {
        const std::string actor = copyActor(kLegacy);
        fs::remove_all(actor + "/model/mp_rank_01_001");
        auto info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        QVERIFY2(hasProblem(*info, "mp_rank_01_001", "missing"), allProblems(*info).c_str());
        QVERIFY2(hasProblem(*info, "mp_rank_01_001", "TP rank 1 of 2, pipeline stage 1 of 2"), allProblems(*info).c_str());
        // Layers of the stage that is left are still numbered globally.
        QVERIFY(info->find("decoder.layers.3.mlp.linear_fc2.weight"));
    }

    void missingStage()
    {
        // Without pipeline stage 0 the layers of stage 1 are still placed, from num_layers in the config.
        const std::string actor = copyActor(kLegacy);
        fs::remove_all(actor + "/model/mp_rank_00_000");
        fs::remove_all(actor + "/model/mp_rank_01_000");
        auto info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        QVERIFY2(hasProblem(*info, "mp_rank_00_000", "missing"), allProblems(*info).c_str());
        QVERIFY2(hasProblem(*info, "mp_rank_01_000", "missing"), allProblems(*info).c_str());
        QVERIFY(info->find("decoder.layers.2.mlp.linear_fc2.weight"));
        QVERIFY(!info->find("decoder.layers.0.mlp.linear_fc2.weight"));
    }

    void wrongTensorParallelSize()
    {
        const std::string actor = copyActor(kLegacy);
        const std::string path = actor + "/transformer_config.json";
        std::string text = test::readFile(path);
        const std::string from = "\"tensor_model_parallel_size\": 2";
        QVERIFY(text.find(from) != std::string::npos);
        text.replace(text.find(from), from.size(), "\"tensor_model_parallel_size\": 4");
        test::writeFile(path, text);
        auto info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        QVERIFY2(hasProblem(*info, "transformer_config.json", "tensor_model_parallel_size 4"), allProblems(*info).c_str());
        QVERIFY2(hasProblem(*info, "model", "only 2 TP rank(s) have folders"), allProblems(*info).c_str());
        QVERIFY2(hasProblem(*info, "mp_rank_03_001", "missing"), allProblems(*info).c_str());

        // A size smaller than the folders says leaves the extra folders out, by name.
        text.replace(text.find("\"tensor_model_parallel_size\": 4"), from.size(), "\"tensor_model_parallel_size\": 1");
        test::writeFile(path, text);
        info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        QVERIFY2(hasProblem(*info, "mp_rank_01_000", "tensor_model_parallel_size 1"), allProblems(*info).c_str());
    }

    void ambiguousFolderNames()
    {
        // mp_rank_00_001 is PP rank 1 or EP rank 1; with no config nothing tells, so nothing is guessed.
        const std::string actor = copyActor(kLegacy);
        fs::remove(actor + "/transformer_config.json");
        auto info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        QVERIFY2(hasProblem(*info, "model", "ambiguous"), allProblems(*info).c_str());
        QVERIFY(info->tensors.empty());
    }

    void distLayerCountMismatch()
    {
        // The stacked layer axis is checked against num_layers from transformer_config.json.
        const std::string actor = copyActor(kDist);
        const std::string path = actor + "/transformer_config.json";
        std::string text = test::readFile(path);
        const std::string from = "\"num_layers\": 4";
        QVERIFY(text.find(from) != std::string::npos);
        text.replace(text.find(from), from.size(), "\"num_layers\": 6");
        test::writeFile(path, text);
        auto info = scanCheckpoint(actor);
        QVERIFY_RESULT(info);
        QVERIFY2(hasProblem(*info, "dist_ckpt", "num_layers 6"), allProblems(*info).c_str());
    }

    void megatronLmWithArgs()
    {
        // The folder names are ambiguous on their own; args in the files say PP 2, EP 1.
        const std::string dir = megatronLmCopy({ { "tensor_model_parallel_size", 2 },
                                                 { "pipeline_model_parallel_size", 2 },
                                                 { "virtual_pipeline_model_parallel_size", -1 },
                                                 { "expert_model_parallel_size", 1 },
                                                 { "num_layers", 4 },
                                                 { "swiglu", 1 } },
                                               1);
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QCOMPARE(QString::fromStdString(info->layout), QStringLiteral("megatron-lm"));
        QVERIFY2(info->problems.empty(), allProblems(*info).c_str());
        QCOMPARE(info->parallel.tensorParallel, 2);
        QCOMPARE(info->parallel.pipelineParallel, 2);
        QCOMPARE(info->tensors.size(), std::size_t(31));
        const Reference ref = reference(kLegacy);
        const TensorInfo* fc1 = info->find("decoder.layers.3.mlp.linear_fc1.weight");
        QVERIFY(fc1);
        QVERIFY(assemble(*fc1)
                == ref.bytes("model.layers.3.mlp.gate_proj.weight") + ref.bytes("model.layers.3.mlp.up_proj.weight"));
    }

    void megatronLmInterleaved()
    {
        // Two model chunks per file with PP 2: chunk v of stage p holds global layers 4v + 2p and 4v + 2p + 1.
        // Both chunks are copies of the same state dict, so layer 4 + n has the bytes of reference layer n.
        const std::string dir = megatronLmCopy({ { "tensor_model_parallel_size", 2 },
                                                 { "pipeline_model_parallel_size", 2 },
                                                 { "virtual_pipeline_model_parallel_size", 2 },
                                                 { "expert_model_parallel_size", 1 },
                                                 { "num_layers", 8 },
                                                 { "swiglu", 1 } },
                                               2);
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(info->problems.empty(), allProblems(*info).c_str());
        QCOMPARE(info->parallel.virtualPipeline, 2);
        const Reference ref = reference(kLegacy);
        for (int layer = 0; layer < 8; ++layer) {
            const TensorInfo* fc2 = info->find("decoder.layers." + std::to_string(layer) + ".mlp.linear_fc2.weight");
            QVERIFY(fc2);
            QVERIFY(assemble(*fc2) == ref.bytes("model.layers." + std::to_string(layer % 4) + ".mlp.down_proj.weight"));
        }
        QVERIFY(!info->find("decoder.layers.8.mlp.linear_fc2.weight"));
        // The embedding is in both chunks of stage 0: one copy provides it, the other is a replica.
        const TensorInfo* embedding = info->find("embedding.word_embeddings.weight");
        QCOMPARE(embedding->pieces.size(), std::size_t(4));
    }

    void inspectCommand()
    {
        QString out, err;
        const int code = test::runTessera(
            { QStringLiteral("inspect"), QStringLiteral("--json"), QString::fromStdString(test::fixture(kLegacy)) }, &out,
            &err);
        QCOMPARE(code, 0);
        const auto json = nlohmann::json::parse(out.toStdString(), nullptr, false);
        QVERIFY2(json.is_object(), qPrintable(out + err));
        QCOMPARE(QString::fromStdString(json.value("format", "")), QStringLiteral("megatron-legacy"));
        bool found = false;
        for (const auto& t : json["tensors"])
            found |= t.value("name", "") == "decoder.layers.3.mlp.linear_fc1.weight"
                     && t["shape"] == nlohmann::json::array({ 352, 64 });
        QVERIFY2(found, qPrintable(out));
    }
};

QTEST_GUILESS_MAIN(TestMegatronReader)
#include "tst_megatron_reader.moc"
