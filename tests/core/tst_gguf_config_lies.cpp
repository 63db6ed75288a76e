// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF export of a config.json that lies about its checkpoint: llama.cpp builds every tensor's shape from the
// config's numbers, so each lie once gave a file that exited 0 and that llama.cpp cannot load. Every lie is refused
// before anything is written, exit 1, with every reason.

#include "testutil.h"
#include "hfmodels.h"

#include "formats/scan.h"
#include "merge/gguf_hparams.h"

#include <nlohmann/json.hpp>

#include <QTest>

#include <filesystem>

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

const char* const kQwen2MoeConfig = R"({
  "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 32,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "num_hidden_layers": 2,
  "intermediate_size": 64, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 32, "num_experts": 4,
  "num_experts_per_tok": 2, "vocab_size": 512, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0
})";

/// A checkpoint to lie about, and the folder its config.json is in.
struct Subject {
    std::string checkpoint, configDir;
};

Subject subject(const std::string& base)
{
    if (base == "llama") { // the real fixture: a verl FSDP2 run, 2 layers, hidden 128, 4 × 32 heads, 2 kv heads
        const std::string actor = copyFixtureFolder("gguf_llama_w2_fp32/global_step_10/actor");
        return { actor, actor + "/huggingface" };
    }
    const std::string dir = writeHfModel(kQwen2MoeConfig); // 4 experts of 16, a shared expert of 32
    for (const char* f : { "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json" })
        fs::copy_file(fixture(std::string("gguf_llama_w2_fp32/reference/") + f), dir + "/" + f);
    return { dir, dir };
}

int exportGguf(const Subject& s, const std::string& target, QString* err, bool dryRun = false)
{
    QStringList args = A({ "merge", "--local_dir", s.checkpoint, "--target_dir", target, "--format", "gguf", "--quiet" });
    if (dryRun)
        args << QStringLiteral("--dry-run");
    return runTessera(args, nullptr, err);
}

} // namespace

class TestGgufConfigLies : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void honestConfigsExport_data()
    {
        QTest::addColumn<QString>("base");
        QTest::addRow("llama fixture") << QStringLiteral("llama");
        QTest::addRow("qwen2moe") << QStringLiteral("qwen2moe");
    }

    void honestConfigsExport()
    {
        QFETCH(QString, base);
        const Subject s = subject(base.toStdString());
        const std::string target = makeTempDir() + "/out";
        QString err;
        QVERIFY2(exportGguf(s, target, &err) == 0, qPrintable(err));
        QVERIFY(fs::exists(target));
    }

    void liesAreRefusedBeforeWriting_data()
    {
        QTest::addColumn<QString>("base");
        QTest::addColumn<QString>("edit");     ///< a JSON object merged into config.json (null removes a key)
        QTest::addColumn<QStringList>("named"); ///< what the message must name, every one
        auto row = [](const char* name, const char* base, const char* edit, QStringList named) {
            QTest::addRow("%s", name) << QString::fromUtf8(base) << QString::fromUtf8(edit) << named;
        };
        const QString hidden = QStringLiteral("hidden_size is 256"), layers = QStringLiteral("num_hidden_layers is 3");
        row("more layers", "llama", R"({"num_hidden_layers": 3})", { layers, QStringLiteral("layers 0–1") });
        row("fewer layers", "llama", R"({"num_hidden_layers": 1})", { QStringLiteral("num_hidden_layers is 1") });
        row("wider hidden", "llama", R"({"hidden_size": 256})", { hidden, QStringLiteral("model.embed_tokens.weight") });
        row("larger head_dim", "llama", R"({"head_dim": 64})", { QStringLiteral("4 × 64 = 256"), QStringLiteral("q_proj") });
        row("odd head_dim", "llama", R"({"head_dim": 33})", { QStringLiteral("head_dim is 33") });
        row("more heads", "llama", R"({"num_attention_heads": 8})", { QStringLiteral("8 × 32 = 256") });
        row("fewer heads", "llama", R"({"num_attention_heads": 2, "num_key_value_heads": 2})",
            { QStringLiteral("2 × 32 = 64") });
        row("fewer kv heads", "llama", R"({"num_key_value_heads": 1})", { QStringLiteral("1 × 32 = 32"), QStringLiteral("k_proj") });
        row("more kv heads", "llama", R"({"num_key_value_heads": 4})", { QStringLiteral("4 × 32 = 128"), QStringLiteral("k_proj") });
        row("heads without head_dim", "llama", R"({"head_dim": null, "num_attention_heads": 8})",
            { QStringLiteral("2 × 16 = 32"), QStringLiteral("hidden_size / num_attention_heads") });
        row("wider MLP", "llama", R"({"intermediate_size": 512})", { QStringLiteral("intermediate_size is 512") });
        row("larger vocabulary", "llama", R"({"vocab_size": 1024})", { QStringLiteral("vocab_size is 1024") });
        row("qwen3 without q/k norms", "llama", R"({"architectures": ["Qwen3ForCausalLM"]})",
            { QStringLiteral("self_attn.q_norm.weight"), QStringLiteral("architectures") });
        row("qwen2 without biases", "llama", R"({"architectures": ["Qwen2ForCausalLM"]})",
            { QStringLiteral("self_attn.q_proj.bias") });
        row("mixtral without experts", "llama",
            R"({"architectures": ["MixtralForCausalLM"], "num_local_experts": 4, "num_experts_per_tok": 2})",
            { QStringLiteral("block_sparse_moe.experts.E.w1.weight"), QStringLiteral("mlp.gate_proj.weight") });
        row("no context", "llama", R"({"max_position_embeddings": 0})", { QStringLiteral("max_position_embeddings") });
        row("negative eps", "llama", R"({"rms_norm_eps": -1e-5})", { QStringLiteral("rms_norm_eps") });
        row("three lies at once", "llama", R"({"num_hidden_layers": 3, "hidden_size": 256, "head_dim": 64})",
            { layers, hidden, QStringLiteral("4 × 64 = 256"), QStringLiteral("2 × 64 = 128") });
        row("more experts", "qwen2moe", R"({"num_experts": 8})", { QStringLiteral("num_experts is 8") });
        row("more experts per token than experts", "qwen2moe", R"({"num_experts_per_tok": 5})",
            { QStringLiteral("num_experts_per_tok is 5") });
        row("wider experts", "qwen2moe", R"({"moe_intermediate_size": 32})", { QStringLiteral("moe_intermediate_size is 32") });
        row("wider shared expert", "qwen2moe", R"({"shared_expert_intermediate_size": 64})",
            { QStringLiteral("shared_expert_intermediate_size is 64") });
        row("qwen3moe without q/k norms or biases' place", "qwen2moe", R"({"architectures": ["Qwen3MoeForCausalLM"]})",
            { QStringLiteral("q_norm"), QStringLiteral("q_proj.bias"), QStringLiteral("shared_expert") });
    }

    void liesAreRefusedBeforeWriting()
    {
        QFETCH(QString, base);
        QFETCH(QString, edit);
        QFETCH(QStringList, named);
        const Subject s = subject(base.toStdString());
        const std::string configPath = s.configDir + "/config.json";
        json config = json::parse(readFile(configPath));
        config.merge_patch(json::parse(edit.toStdString()));
        writeFile(configPath, config.dump(2));
        for (bool dryRun : { true, false }) {
            const std::string target = makeTempDir() + "/out";
            QString err;
            QCOMPARE(exportGguf(s, target, &err, dryRun), 1);
            QVERIFY2(!fs::exists(target), target.c_str());
            // A lie about which parameters exist (layers, experts, an architecture with other tensors) is already a
            // problem of the checkpoint: config.json expects parameters it does not have, and nothing is exported.
            if (err.contains(QStringLiteral("is not exported")) && err.contains(QStringLiteral(": missing: ")))
                continue;
            QVERIFY2(err.contains(q(configPath)), qPrintable(err));
            for (const QString& n : named)
                QVERIFY2(err.contains(n), qPrintable(QStringLiteral("'") + n + QStringLiteral("' not in: ") + err));
        }
    }

    void tiedHeadOfAnotherShape()
    {
        // Tied embeddings write no output head: llama.cpp uses the embedding, so a head of another shape is not
        // the embedding whatever config.json says.
        auto info = scanCheckpoint(fixture("gguf_llama_w2_fp32/reference"));
        QVERIFY_RESULT(info);
        const auto arch = ggufArchitectureFor("LlamaForCausalLM");
        auto hp = readGgufHparams(json::parse(readFile(fixture("gguf_llama_w2_fp32/reference/config.json"))), *arch, "c");
        QVERIFY_RESULT(hp);
        QVERIFY_RESULT(checkGgufHparams(*hp, *arch, *info, true, "c"));
        for (auto& t : info->tensors)
            if (t.name == "lm_head.weight")
                t.shape = { 500, 128 };
        QVERIFY(!checkGgufHparams(*hp, *arch, *info, false, "c")); // untied: its rows are not vocab_size
        const Status tied = checkGgufHparams(*hp, *arch, *info, true, "c");
        QVERIFY(!tied);
        QVERIFY2(tied.error().message.find("lm_head.weight is [500, 128] and model.embed_tokens.weight [512, 128]")
                     != std::string::npos,
                 tied.error().message.c_str());
    }
};

QTEST_GUILESS_MAIN(TestGgufConfigLies)
#include "tst_gguf_config_lies.moc"
