// SPDX-License-Identifier: GPL-3.0-or-later
// LoRA checkpoints: the real verl FSDP2 LoRA fixture fused within 1e-5 of its reference and its adapter bit for
// bit; adapter-only (save_lora_only) checkpoints with and without a base model; and PEFT checkpoints written here
// in bf16 with an embedding adapter and rsLoRA, whose fused values are checked element by element.

#include "testutil.h"

#include "compare/model_compare.h"
#include "formats/safetensors_reader.h"
#include "formats/safetensors_writer.h"
#include "formats/scan.h"
#include "mapping/hf_parameter_check.h"
#include "mapping/lora.h"
#include "mapping/lora_config.h"
#include "merge/lora_fuse.h"
#include "merge/lora_plan.h"
#include "merge/merge_engine.h"

#include <nlohmann/json.hpp>

#include <QProcess>
#include <QStandardPaths>
#include <QTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

std::string loraActor() { return fixture("lora_llama_w2_fp32/global_step_10/actor"); }

/// A deterministic value in about [-1, 1) for element `i` of tensor `salt`.
float valueAt(int salt, std::size_t i)
{
    const std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u + static_cast<std::uint32_t>(salt) * 40503u;
    return static_cast<float>((x >> 8) % 2001) / 1000.0f - 1.0f;
}

struct Synthetic {
    std::string name;
    Shape shape;
    std::vector<float> values; ///< as stored (already bf16-representable)
};

/// A PEFT-wrapped llama-ish state dict in bf16: q_proj with a LoRA pair, embed_tokens with an embedding adapter,
/// a norm and an lm_head without adapters.
std::vector<Synthetic> syntheticPeft()
{
    std::vector<Synthetic> t = {
        { "base_model.model.model.embed_tokens.base_layer.weight", { 7, 5 }, {} },
        { "base_model.model.model.embed_tokens.lora_embedding_A.default", { 2, 7 }, {} },
        { "base_model.model.model.embed_tokens.lora_embedding_B.default", { 5, 2 }, {} },
        { "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight", { 6, 5 }, {} },
        { "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight", { 2, 5 }, {} },
        { "base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight", { 6, 2 }, {} },
        { "base_model.model.model.norm.weight", { 5 }, {} },
        { "base_model.model.lm_head.weight", { 7, 5 }, {} },
    };
    for (std::size_t k = 0; k < t.size(); ++k) {
        std::size_t n = 1;
        for (auto s : t[k].shape)
            n *= static_cast<std::size_t>(s);
        for (std::size_t i = 0; i < n; ++i)
            t[k].values.push_back(bf16ToFloat(floatToBf16(valueAt(static_cast<int>(k), i))));
    }
    return t;
}

/// Writes `tensors` as one bf16 safetensors file in a fresh folder, with `meta` as lora_train_meta.json.
std::string writeSyntheticCheckpoint(const std::vector<Synthetic>& tensors, const std::string& meta)
{
    const std::string dir = makeTempDir() + "/actor";
    fs::create_directories(dir);
    std::vector<SafetensorsEntry> entries;
    for (const auto& t : tensors)
        entries.push_back({ t.name, DType::BFloat16, t.shape });
    auto status = writeSafetensorsFile(dir + "/model.safetensors", entries, { { "format", "pt" } },
                                       [&](std::size_t i, std::uint8_t* dst, std::uint64_t) {
                                           for (std::size_t e = 0; e < tensors[i].values.size(); ++e) {
                                               const std::uint16_t h = floatToBf16(tensors[i].values[e]);
                                               std::memcpy(dst + 2 * e, &h, 2);
                                           }
                                           return Status::success();
                                       });
    if (!status)
        qFatal("%s", status.error().message.c_str());
    if (!meta.empty())
        writeFile(dir + "/lora_train_meta.json", meta);
    return dir;
}

const Synthetic& byName(const std::vector<Synthetic>& t, const std::string& name)
{
    for (const auto& s : t)
        if (s.name == name)
            return s;
    qFatal("no tensor %s", name.c_str());
}

/// W + (B·A)·scale in the order the fuse kernel promises: each dot product rounded once to fp32, scaled in fp32,
/// added in fp32. `transposed` is an embedding's (B·A)ᵀ.
std::vector<float> fusedExpectation(const Synthetic& w, const Synthetic& a, const Synthetic& b, double scale,
                                    bool transposed)
{
    const std::int64_t rows = w.shape[0], cols = w.shape[1], r = a.shape[0];
    std::vector<float> out(w.values);
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) {
            double dot = 0;
            for (std::int64_t k = 0; k < r; ++k)
                dot += transposed ? static_cast<double>(b.values[j * r + k]) * a.values[k * rows + i]
                                  : static_cast<double>(b.values[i * r + k]) * a.values[k * cols + j];
            out[i * cols + j] = w.values[i * cols + j] + static_cast<float>(dot) * static_cast<float>(scale);
        }
    return out;
}

/// The values of tensor `name` in the safetensors folder `dir`, as floats.
std::vector<float> readOutput(const std::string& dir, const std::string& name, DType* dtype = nullptr)
{
    auto info = scanSafetensorsFolder(dir);
    if (!info)
        qFatal("%s", info.error().message.c_str());
    const TensorInfo* t = info->find(name);
    if (!t)
        qFatal("no %s in %s", name.c_str(), dir.c_str());
    const std::string bytes = readFile(t->pieces.front().file);
    std::vector<float> values(t->numel());
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (t->dtype == DType::BFloat16) {
            std::uint16_t h;
            std::memcpy(&h, bytes.data() + t->pieces.front().dataOffset + 2 * i, 2);
            values[i] = bf16ToFloat(h);
        } else {
            std::memcpy(&values[i], bytes.data() + t->pieces.front().dataOffset + 4 * i, 4);
        }
    }
    if (dtype)
        *dtype = t->dtype;
    return values;
}

/// The fused view's base weights alone (its factors left out), written as a Hugging Face folder.
std::string writeBaseModel(const LoraCheckpoint& lora)
{
    const CheckpointInfo base = lora.fused.withoutLoraUpdates();
    auto plan = planMerge(base, {});
    if (!plan)
        qFatal("%s", plan.error().message.c_str());
    const std::string dir = makeTempDir() + "/base";
    MergeRunOptions run;
    run.sync = false;
    auto outcome = mergeCheckpoint(base, *plan, dir, run);
    if (!outcome)
        qFatal("%s", outcome.error().message.c_str());
    return dir;
}

Result<MergeOutcome> mergeLora(const LoraCheckpoint& lora, const std::string& target, LoraOutput what,
                               const MergeOptions& options = {})
{
    auto plans = planLoraMerge(lora, options, what);
    TESSERA_TRY(plans);
    MergeRunOptions run;
    run.sync = false;
    return mergeCheckpoints(plans->outputs(lora), target, run);
}

} // namespace

class TestLora : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void fixtureFusesWithinToleranceAndExportsTheAdapterBitForBit()
    {
        auto info = scanCheckpoint(loraActor());
        QVERIFY_RESULT(info);
        QVERIFY(hasLoraTensors(*info));
        auto lora = readLoraCheckpoint(*info, {});
        QVERIFY_RESULT(lora);
        QCOMPARE(lora->modules.size(), std::size_t(8));
        QCOMPARE(lora->config.r, std::int64_t(8));
        QCOMPARE(lora->config.alpha, 16.0);
        QCOMPARE(lora->config.targetModules, (std::vector<std::string> { "q_proj", "v_proj" }));
        QVERIFY(lora->hasBase && !lora->adapterOnly);
        QCOMPARE(lora->modules.front().scale, 2.0);

        const std::string target = makeTempDir() + "/merged";
        auto outcome = mergeLora(*lora, target, LoraOutput::Both);
        QVERIFY_RESULT(outcome);
        // The adapter, bit for bit, and a config PEFT reads back with the same r, alpha and targets.
        QCOMPARE(readFile(target + "/lora_adapter/adapter_model.safetensors"),
                 readFile(fixture("lora_llama_w2_fp32/reference_adapter/adapter_model.safetensors")));
        const auto config = nlohmann::json::parse(readFile(target + "/lora_adapter/adapter_config.json"));
        const auto expected = nlohmann::json::parse(readFile(fixture("lora_llama_w2_fp32/reference_adapter/adapter_config.json")));
        for (const char* key : { "peft_type", "r", "lora_alpha", "target_modules", "task_type", "bias" })
            QVERIFY2(config[key] == expected[key], key);

        // The fused model: untouched tensors bit for bit, fused ones within 1e-5 of the weights' scale.
        auto plans = planLoraMerge(*lora, {}, LoraOutput::Fused);
        QVERIFY_RESULT(plans);
        QCOMPARE(plans->fused->fusedTensors, std::size_t(8));
        auto report = compareWithReference(lora->fused, *plans->fused, fixture("lora_llama_w2_fp32/reference"), {});
        QVERIFY_RESULT(report);
        QVERIFY2(report->ok(), report->text(true).c_str());
        std::size_t exact = 0;
        for (const auto& t : report->tensors)
            exact += t.note.empty() ? 1 : 0;
        QCOMPARE(exact, report->tensors.size() - 8);
        // …and the written file is that model: the same comparison against the merged folder itself.
        auto written = compareWithReference(lora->fused, *plans->fused, target, {});
        QVERIFY_RESULT(written);
        QVERIFY2(written->ok(), written->text(true).c_str());
    }

    void fusedDiffersFromTheBaseWhereTheAdapterActs()
    {
        auto info = scanCheckpoint(loraActor());
        QVERIFY_RESULT(info);
        auto lora = readLoraCheckpoint(*info, {});
        QVERIFY_RESULT(lora);
        // Merged without its deltas, the checkpoint is the base: the fused q_proj must not be it (verl's bug).
        const std::string baseDir = writeBaseModel(*lora);
        const std::string fusedDir = makeTempDir() + "/fused";
        QVERIFY_RESULT(mergeLora(*lora, fusedDir, LoraOutput::Fused));
        QVERIFY(readOutput(baseDir, "model.layers.0.self_attn.q_proj.weight")
                != readOutput(fusedDir, "model.layers.0.self_attn.q_proj.weight"));
        QCOMPARE(readOutput(baseDir, "model.layers.0.self_attn.k_proj.weight"),
                 readOutput(fusedDir, "model.layers.0.self_attn.k_proj.weight"));
        QVERIFY(!fs::exists(fusedDir + "/lora_adapter"));
    }

    void adapterOnlyCheckpointNeedsABaseModel()
    {
        auto full = scanCheckpoint(loraActor());
        QVERIFY_RESULT(full);
        // verl's save_lora_only keeps only the lora_ keys of the same files.
        CheckpointInfo adapterOnly = *full;
        adapterOnly.tensors.clear();
        for (const auto& t : full->tensors)
            if (t.name.find("lora_") != std::string::npos)
                adapterOnly.tensors.push_back(t);
        auto lora = readLoraCheckpoint(adapterOnly, {});
        QVERIFY_RESULT(lora);
        QVERIFY(lora->adapterOnly && !lora->hasBase);
        QVERIFY(std::any_of(lora->notes.begin(), lora->notes.end(),
                            [](const std::string& n) { return n.find("--base_model") != std::string::npos; }));
        auto fusedOnly = planLoraMerge(*lora, {}, LoraOutput::Fused);
        QVERIFY(!fusedOnly);
        QVERIFY(fusedOnly.error().message.find("--base_model") != std::string::npos);
        // Both: the adapter alone, still bit for bit.
        const std::string target = makeTempDir() + "/adapter";
        QVERIFY_RESULT(mergeLora(*lora, target, LoraOutput::Both));
        QVERIFY(!fs::exists(target + "/model.safetensors"));
        QCOMPARE(readFile(target + "/lora_adapter/adapter_model.safetensors"),
                 readFile(fixture("lora_llama_w2_fp32/reference_adapter/adapter_model.safetensors")));

        // With the base model (here: the full checkpoint's base weights as a Hugging Face folder) the fused model
        // is the same as from the full checkpoint.
        auto fromFull = readLoraCheckpoint(*full, {});
        QVERIFY_RESULT(fromFull);
        auto base = scanCheckpoint(writeBaseModel(*fromFull));
        QVERIFY_RESULT(base);
        auto withBase = readLoraCheckpoint(adapterOnly, {}, &*base);
        QVERIFY_RESULT(withBase);
        QVERIFY(withBase->hasBase);
        auto plans = planLoraMerge(*withBase, {}, LoraOutput::Fused);
        QVERIFY_RESULT(plans);
        auto report = compareWithReference(withBase->fused, *plans->fused, fixture("lora_llama_w2_fp32/reference"), {});
        QVERIFY_RESULT(report);
        QVERIFY2(report->ok(), report->text(true).c_str());

        // A "base" that is itself a LoRA checkpoint is refused.
        auto wrapped = readLoraCheckpoint(adapterOnly, {}, &*full);
        QVERIFY(!wrapped);
        QVERIFY2(wrapped.error().message.find("base model holds LoRA tensors") != std::string::npos,
                 wrapped.error().message.c_str());
    }

    void unknownAlphaIsAnErrorNotAGuess()
    {
        const auto tensors = syntheticPeft();
        const std::string dir = writeSyntheticCheckpoint(tensors, "");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        auto lora = readLoraCheckpoint(*info, {});
        QVERIFY(!lora);
        QVERIFY2(lora.error().message.find("--lora_alpha") != std::string::npos, lora.error().message.c_str());
        LoraSettings settings;
        settings.alpha = 4;
        auto given = readLoraCheckpoint(*info, settings);
        QVERIFY_RESULT(given);
        QCOMPARE(given->config.alphaSource, std::string("--lora_alpha"));
        QCOMPARE(given->modules.front().scale, 2.0);
    }

    void bf16WithEmbeddingAdapterAndRsLora()
    {
        const auto tensors = syntheticPeft();
        const std::string dir = writeSyntheticCheckpoint(tensors, R"({"r": 2, "lora_alpha": 3, "use_rslora": true})");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        auto lora = readLoraCheckpoint(*info, {});
        QVERIFY_RESULT(lora);
        QVERIFY(lora->config.useRslora);
        QCOMPARE(lora->modules.size(), std::size_t(2));
        const double scale = 3 / std::sqrt(2.0);
        for (const auto& m : lora->modules)
            QCOMPARE(m.scale, scale);

        const std::string target = makeTempDir() + "/out";
        QVERIFY_RESULT(mergeLora(*lora, target, LoraOutput::Both));
        const std::string p = "base_model.model.model.";
        auto expectBf16 = [&](const std::string& module, bool embedding) {
            const auto& w = byName(tensors, p + module + ".base_layer.weight");
            const auto& a = byName(tensors, p + module + (embedding ? ".lora_embedding_A.default" : ".lora_A.default.weight"));
            const auto& b = byName(tensors, p + module + (embedding ? ".lora_embedding_B.default" : ".lora_B.default.weight"));
            std::vector<float> expected = fusedExpectation(w, a, b, scale, embedding);
            for (auto& v : expected)
                v = bf16ToFloat(floatToBf16(v));
            DType dtype;
            const auto got = readOutput(target, "model." + module + ".weight", &dtype);
            QCOMPARE(dtype, DType::BFloat16);
            QCOMPARE(got, expected);
        };
        expectBf16("embed_tokens", true);
        expectBf16("layers.0.self_attn.q_proj", false);
        QCOMPARE(readOutput(target, "model.norm.weight"), byName(tensors, p + "norm.weight").values);
        QCOMPARE(readOutput(target, "lm_head.weight"), byName(tensors, "base_model.model.lm_head.weight").values);
        // The adapter keeps PEFT's on-disk names (no adapter name) and the factors' own dtype.
        auto adapter = scanSafetensorsFolder(target + "/lora_adapter");
        QVERIFY_RESULT(adapter);
        QVERIFY(adapter->find(p + "embed_tokens.lora_embedding_A"));
        QVERIFY(adapter->find(p + "layers.0.self_attn.q_proj.lora_B.weight"));
        QCOMPARE(adapter->find(p + "layers.0.self_attn.q_proj.lora_B.weight")->dtype, DType::BFloat16);
        const auto config = nlohmann::json::parse(readFile(target + "/lora_adapter/adapter_config.json"));
        QCOMPARE(config["use_rslora"].get<bool>(), true);
        QCOMPARE(config["target_modules"].get<std::vector<std::string>>(),
                 (std::vector<std::string> { "embed_tokens", "q_proj" }));

        // --dtype fp32: the base converts exactly, so the fused value is the fp32 sum itself.
        MergeOptions fp32;
        fp32.dtype = DType::Float32;
        const std::string wide = makeTempDir() + "/fp32";
        QVERIFY_RESULT(mergeLora(*lora, wide, LoraOutput::Fused, fp32));
        const auto& w = byName(tensors, p + "layers.0.self_attn.q_proj.base_layer.weight");
        const auto& a = byName(tensors, p + "layers.0.self_attn.q_proj.lora_A.default.weight");
        const auto& b = byName(tensors, p + "layers.0.self_attn.q_proj.lora_B.default.weight");
        QCOMPARE(readOutput(wide, "model.layers.0.self_attn.q_proj.weight"), fusedExpectation(w, a, b, scale, false));
    }

    void adapterThatDoesNotFitTheBaseIsRefused()
    {
        auto tensors = syntheticPeft();
        for (auto& t : tensors)
            if (t.name.find("q_proj.lora_B") != std::string::npos) {
                t.shape = { 4, 2 }; // the base q_proj has 6 rows
                t.values.resize(8);
            }
        const std::string dir = writeSyntheticCheckpoint(tensors, R"({"r": 2, "lora_alpha": 2})");
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        auto lora = readLoraCheckpoint(*info, {});
        QVERIFY(!lora);
        QVERIFY2(lora.error().message.find("q_proj.weight is [6, 5]") != std::string::npos, lora.error().message.c_str());
    }

    void missingFactorAndDoraAreNamed()
    {
        auto tensors = syntheticPeft();
        tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                     [](const Synthetic& t) { return t.name.find("q_proj.lora_A") != std::string::npos; }),
                      tensors.end());
        auto info = scanCheckpoint(writeSyntheticCheckpoint(tensors, R"({"lora_alpha": 2})"));
        QVERIFY_RESULT(info);
        auto lora = readLoraCheckpoint(*info, {});
        QVERIFY(!lora);
        QVERIFY2(lora.error().message.find("lora_A is missing") != std::string::npos, lora.error().message.c_str());

        tensors = syntheticPeft();
        tensors.push_back({ "base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector.default.weight",
                            { 6 }, std::vector<float>(6, 1.0f) });
        auto dora = scanCheckpoint(writeSyntheticCheckpoint(tensors, R"({"lora_alpha": 2})"));
        QVERIFY_RESULT(dora);
        auto refused = readLoraCheckpoint(*dora, {});
        QVERIFY(!refused);
        QVERIFY2(refused.error().message.find("DoRA") != std::string::npos, refused.error().message.c_str());
    }

    // The base weights are the model: one a LoRA checkpoint lacks (under its PEFT name) is missing from the fused
    // model, and whatever is wrong with the checkpoint is wrong with both models made of it.
    void checkpointProblemsReachTheFusedModelAndTheAdapter()
    {
        auto info = scanCheckpoint(loraActor());
        QVERIFY_RESULT(info);
        CheckpointInfo complete = *info;
        QVERIFY_RESULT(checkExpectedParameters(complete, {}));
        QVERIFY(complete.problems.empty() && complete.warnings.empty());
        const auto dropped = std::remove_if(info->tensors.begin(), info->tensors.end(), [](const TensorInfo& t) {
            return t.name == "base_model.model.model.layers.1.mlp.down_proj.weight";
        });
        QCOMPARE(std::distance(dropped, info->tensors.end()), std::ptrdiff_t(1));
        info->tensors.erase(dropped, info->tensors.end());
        QVERIFY_RESULT(checkExpectedParameters(*info, {}));
        QCOMPARE(info->problems.size(), std::size_t(1));
        QCOMPARE(info->problems.front().tensor, std::string("model.layers.1.mlp.down_proj.weight"));
        auto lora = readLoraCheckpoint(*info, {});
        QVERIFY_RESULT(lora);
        for (const LoraOutput what : { LoraOutput::Both, LoraOutput::Fused }) {
            auto plans = planLoraMerge(*lora, {}, what);
            QVERIFY(!plans);
            QVERIFY2(plans.error().message.find("model.layers.1.mlp.down_proj.weight: missing") != std::string::npos,
                     plans.error().message.c_str());
        }
        QVERIFY_RESULT(planLoraMerge(*lora, {}, LoraOutput::Adapter)); // the adapter itself is whole

        // A rank file gone: every tensor it held has holes, the factors too, and neither model is written.
        const std::string copy = copyFixtureFolder("lora_llama_w2_fp32");
        fs::remove(copy + "/global_step_10/actor/model_world_size_2_rank_1.pt");
        for (const char* what : { "both", "adapter" }) {
            const std::string target = makeTempDir() + "/out";
            QString out, err;
            QCOMPARE(runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"),
                                  QString::fromStdString(copy + "/global_step_10/actor"), QStringLiteral("--target_dir"),
                                  QString::fromStdString(target), QStringLiteral("--lora"), QString::fromUtf8(what) },
                                &out, &err),
                     1);
            QVERIFY2(err.contains(QStringLiteral("rank 1")), qPrintable(err));
            QVERIFY(!fs::exists(target));
        }
    }

    // Every key of adapter_config.json and lora_train_meta.json is read with the JSON type PEFT writes it in: a number
    // or a boolean given as a string is refused alike, naming the key and the type; so is a key whose feature the
    // fuse does not do, rather than being ignored.
    void adapterConfigKeysAreReadWithTheirTypes_data()
    {
        QTest::addColumn<QString>("config");
        QTest::addColumn<QString>("message"); // empty: accepted
        QTest::newRow("alpha as a string") << R"({"lora_alpha": "16"})" << R"("lora_alpha" must be a JSON number, got "16" (a string))";
        QTest::newRow("rslora as a string") << R"({"lora_alpha": 2, "use_rslora": "true"})"
                                            << R"("use_rslora" must be a JSON boolean (true or false), got "true" (a string))";
        QTest::newRow("rslora false as a string") << R"({"lora_alpha": 2, "use_rslora": "false"})" << R"("use_rslora" must be a JSON boolean)";
        QTest::newRow("r as a string") << R"({"lora_alpha": 2, "r": "2"})" << R"("r" must be a JSON integer, got "2" (a string))";
        QTest::newRow("r not positive") << R"({"lora_alpha": 2, "r": 0})" << R"("r" must be a positive integer)";
        QTest::newRow("alpha 1e308") << R"({"lora_alpha": 1e308})" << R"("lora_alpha" must be at most 1e+09)";
        QTest::newRow("alpha negative") << R"({"lora_alpha": -2})" << R"("lora_alpha" must be a positive number)";
        QTest::newRow("DoRA") << R"({"lora_alpha": 2, "use_dora": true})" << R"("use_dora" is true: DoRA)";
        QTest::newRow("DoRA as a string") << R"({"lora_alpha": 2, "use_dora": "false"})" << R"("use_dora" must be a JSON boolean)";
        QTest::newRow("some layers") << R"({"lora_alpha": 2, "layers_to_transform": [0]})" << R"("layers_to_transform" is [0]: the adapter applies to some layers only)";
        QTest::newRow("one layer") << R"({"lora_alpha": 2, "layers_to_transform": 1})" << R"("layers_to_transform" is 1)";
        QTest::newRow("layers pattern") << R"({"lora_alpha": 2, "layers_pattern": "layers"})" << R"("layers_pattern" is "layers")";
        QTest::newRow("rank pattern") << R"({"lora_alpha": 2, "rank_pattern": {"q_proj": 4}})" << R"("rank_pattern" is {"q_proj":4})";
        QTest::newRow("alpha pattern") << R"({"lora_alpha": 2, "alpha_pattern": {"q_proj": 4}})" << R"("alpha_pattern" is)";
        QTest::newRow("biases") << R"({"lora_alpha": 2, "bias": "all"})" << R"("bias" is "all")";
        QTest::newRow("LoRA bias") << R"({"lora_alpha": 2, "lora_bias": true})" << R"("lora_bias" is true)";
        QTest::newRow("fan in fan out") << R"({"lora_alpha": 2, "fan_in_fan_out": true})" << R"("fan_in_fan_out" is true)";
        QTest::newRow("layer replication") << R"({"lora_alpha": 2, "layer_replication": [[0, 1]]})" << R"("layer_replication" is [[0,1]])";
        QTest::newRow("another PEFT type") << R"({"lora_alpha": 2, "peft_type": "LOHA"})" << R"("peft_type" is "LOHA")";
        QTest::newRow("token indices") << R"({"lora_alpha": 2, "trainable_token_indices": [1, 2]})" << R"("trainable_token_indices")";
        QTest::newRow("PEFT's defaults")
            << R"({"lora_alpha": 2, "r": 2, "use_rslora": false, "use_dora": false, "layers_to_transform": null,
                   "layers_pattern": null, "rank_pattern": {}, "alpha_pattern": {}, "bias": "none", "peft_type": "LORA",
                   "fan_in_fan_out": false, "layer_replication": null, "task_type": "CAUSAL_LM", "lora_dropout": 0.05,
                   "target_modules": ["q_proj"], "init_lora_weights": true})"
            << "";
    }
    void adapterConfigKeysAreReadWithTheirTypes()
    {
        QFETCH(QString, config);
        QFETCH(QString, message);
        for (const char* file : { "lora_train_meta.json", "adapter_config.json" }) {
            const std::string dir = writeSyntheticCheckpoint(syntheticPeft(), "");
            writeFile(dir + "/" + file, config.toStdString());
            auto info = scanCheckpoint(dir);
            QVERIFY_RESULT(info);
            auto lora = readLoraCheckpoint(*info, {});
            if (message.isEmpty()) {
                QVERIFY_RESULT(lora);
                continue;
            }
            QVERIFY(!lora);
            QVERIFY2(lora.error().message.find(file) != std::string::npos
                         && lora.error().message.find(message.toStdString()) != std::string::npos,
                     lora.error().message.c_str());
        }
    }

    // One bound for alpha, from the flag or a file; a fused weight the update makes infinite is an error naming it.
    void alphaIsBoundedAndAnOverflowingFuseIsAnError()
    {
        const std::string dir = writeSyntheticCheckpoint(syntheticPeft(), R"({"lora_alpha": 2})");
        QString out, err;
        for (const char* alpha : { "1e308", "1.5e9", "inf", "0" }) {
            QCOMPARE(runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), QString::fromStdString(dir),
                                  QStringLiteral("--target_dir"), QString::fromStdString(makeTempDir() + "/x"),
                                  QStringLiteral("--lora_alpha"), QString::fromUtf8(alpha) },
                                &out, &err),
                     2);
            QVERIFY2(err.contains(QStringLiteral("--lora_alpha")), qPrintable(err));
        }
        auto info = scanCheckpoint(dir);
        QVERIFY_RESULT(info);
        LoraSettings settings;
        settings.alpha = kMaxLoraAlpha;
        QVERIFY_RESULT(readLoraCheckpoint(*info, settings));
        settings.alpha = kMaxLoraAlpha * 2;
        QVERIFY(!readLoraCheckpoint(*info, settings));

        // Factors whose update overflows float32 (each about 1e30): the fuse stops, naming the weight.
        auto tensors = syntheticPeft();
        for (auto& t : tensors)
            if (t.name.find("q_proj.lora_") != std::string::npos)
                for (auto& v : t.values)
                    v = bf16ToFloat(floatToBf16(v * 1e30f));
        auto huge = scanCheckpoint(writeSyntheticCheckpoint(tensors, R"({"lora_alpha": 2})"));
        QVERIFY_RESULT(huge);
        auto lora = readLoraCheckpoint(*huge, {});
        QVERIFY_RESULT(lora);
        const std::string target = makeTempDir() + "/out";
        auto outcome = mergeLora(*lora, target, LoraOutput::Both);
        QVERIFY(!outcome);
        QVERIFY2(outcome.error().message.find("model.layers.0.self_attn.q_proj.weight: fusing its LoRA update")
                         != std::string::npos
                     && outcome.error().message.find("infinite or NaN") != std::string::npos,
                 outcome.error().message.c_str());
        QVERIFY(!fs::exists(target));
    }

    void lowRankProductMatchesLongDouble()
    {
        // Rows × cols large enough to spread over threads and blocks; every element within one fp32 rounding.
        const std::int64_t rows = 97, cols = 131, r = 16;
        std::vector<float> w(static_cast<std::size_t>(rows * cols)), c(static_cast<std::size_t>(rows * r)),
            m(static_cast<std::size_t>(r * cols));
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] = valueAt(1, i);
        for (std::size_t i = 0; i < c.size(); ++i)
            c[i] = valueAt(2, i) * 0.1f;
        for (std::size_t i = 0; i < m.size(); ++i)
            m[i] = valueAt(3, i) * 0.1f;
        std::vector<float> fused = w;
        QVERIFY(addLowRankProduct(fused.data(), rows, cols, c.data(), m.data(), r, 0.5f, 4));
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j) {
                long double dot = 0;
                for (std::int64_t k = 0; k < r; ++k)
                    dot += static_cast<long double>(c[i * r + k]) * m[k * cols + j];
                const float expected = w[i * cols + j] + static_cast<float>(dot) * 0.5f;
                QCOMPARE(fused[i * cols + j], expected);
            }
        QVERIFY(!addLowRankProduct(fused.data(), rows, cols, c.data(), m.data(), r, 0.5f, 2, [] { return true; }));
    }

    /// Ctrl-C while the adapter alone is written into --peft_target_dir is said as a cancel ("canceled; nothing was
    /// written"), though the adapter's error reaches the command with "the adapter: " before it. strace sends the
    /// SIGINT at the run's first mkdir, the adapter's staging folder's: after the scan, before any byte is written.
    void adapterCanceledIsReportedAsACancel()
    {
        if (QStandardPaths::findExecutable(QStringLiteral("strace")).isEmpty())
            QSKIP("strace is not installed (packaging/install-deps.sh installs it)");
        const std::string root = makeTempDir();
        QProcess strace;
        strace.start(QStringLiteral("strace"),
                     A({ "-f", "-o", "/dev/null", "-e", "trace=mkdir,mkdirat", "-e",
                         "inject=mkdir,mkdirat:signal=INT:when=1", tesseraBinary(), "merge", "--local_dir",
                         loraActor(), "--target_dir", root + "/fused", "--lora", "adapter", "--peft_target_dir",
                         root + "/adapter" }));
        QVERIFY(strace.waitForFinished(600000));
        const QString err = QString::fromUtf8(strace.readAllStandardError());
        QCOMPARE(strace.exitStatus(), QProcess::NormalExit);
        QCOMPARE(strace.exitCode(), 1);
        QVERIFY2(err.contains(QStringLiteral("merge: canceled; nothing was written")), qPrintable(err));
        QVERIFY(!fs::exists(root + "/adapter/adapter_model.safetensors"));
        QVERIFY(!fs::exists(root + "/fused"));
    }

    void cliMergesAndTestsTheFixture()
    {
        const std::string target = makeTempDir() + "/cli";
        QString out, err;
        QCOMPARE(runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), QString::fromStdString(loraActor()),
                              QStringLiteral("--target_dir"), QString::fromStdString(target) },
                            &out, &err),
                 0);
        QVERIFY2(out.contains(QStringLiteral("8 weights fused")), qPrintable(out + err));
        QVERIFY(fs::exists(target + "/lora_adapter/adapter_config.json"));
        QVERIFY(fs::exists(target + "/config.json"));
        QCOMPARE(runTessera({ QStringLiteral("test"), QStringLiteral("--local_dir"), QString::fromStdString(loraActor()),
                              QStringLiteral("--test_hf_dir"),
                              QString::fromStdString(fixture("lora_llama_w2_fp32/reference")) },
                            &out, &err),
                 0);
        QVERIFY2(out.contains(QStringLiteral("LoRA-fused: within 1e-05")), qPrintable(out));
        // --lora adapter: only the adapter; test then compares it with the reference adapter.
        const std::string adapterOnly = makeTempDir() + "/adapter";
        QCOMPARE(runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), QString::fromStdString(loraActor()),
                              QStringLiteral("--target_dir"), QString::fromStdString(adapterOnly), QStringLiteral("--lora"),
                              QStringLiteral("adapter") },
                            &out, &err),
                 0);
        QVERIFY(!fs::exists(adapterOnly + "/model.safetensors"));
        QVERIFY(fs::exists(adapterOnly + "/lora_adapter/adapter_model.safetensors"));
        QCOMPARE(runTessera({ QStringLiteral("test"), QStringLiteral("--local_dir"), QString::fromStdString(loraActor()),
                              QStringLiteral("--test_hf_dir"),
                              QString::fromStdString(fixture("lora_llama_w2_fp32/reference_adapter")),
                              QStringLiteral("--lora"), QStringLiteral("adapter") },
                            &out, &err),
                 0);
        // diff --lora_update: the base against the fused model, only the adapted weights differ.
        QCOMPARE(runTessera({ QStringLiteral("diff"), QString::fromStdString(loraActor()), QStringLiteral("--lora_update"),
                              QStringLiteral("--json") },
                            &out, &err),
                 1);
        const auto diff = nlohmann::json::parse(out.toStdString());
        QCOMPARE(diff["counts"]["different"].get<int>(), 8);
        QCOMPARE(diff["counts"]["identical"].get<int>(), 31);
        QCOMPARE(runTessera({ QStringLiteral("diff"), QString::fromStdString(fixture("fsdp2_llama_w4/global_step_10/actor")),
                              QStringLiteral("--lora_update") },
                            &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("no LoRA update")), qPrintable(err));
        // An adapter folder holding files of the user's is not replaced, and --dry-run says so as the merge would.
        const std::string kept = makeTempDir() + "/kept";
        fs::create_directories(kept + "/lora_adapter");
        writeFile(kept + "/lora_adapter/notes.txt", "mine\n");
        for (const char* dryRun : { "--dry-run", "--quiet" }) {
            QCOMPARE(runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), QString::fromStdString(loraActor()),
                                  QStringLiteral("--target_dir"), QString::fromStdString(kept), QString::fromUtf8(dryRun) },
                                &out, &err),
                     1);
            QVERIFY2(err.contains(QStringLiteral("holds notes.txt")), qPrintable(err));
        }
        QVERIFY(!fs::exists(kept + "/model.safetensors"));
        // Usage errors.
        QCOMPARE(runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), QString::fromStdString(loraActor()),
                              QStringLiteral("--target_dir"), QString::fromStdString(target), QStringLiteral("--lora"),
                              QStringLiteral("merged") },
                            &out, &err),
                 2);
        QCOMPARE(runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"),
                              QString::fromStdString(fixture("fsdp2_llama_w4/global_step_10/actor")),
                              QStringLiteral("--target_dir"), QString::fromStdString(makeTempDir() + "/x"),
                              QStringLiteral("--lora_alpha"), QStringLiteral("16") },
                            &out, &err),
                 2);
    }
};

QTEST_GUILESS_MAIN(TestLora)
#include "tst_lora.moc"
