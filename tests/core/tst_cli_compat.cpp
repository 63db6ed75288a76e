// SPDX-License-Identifier: GPL-3.0-or-later
// The command lines the guides around verl's merger teach, pasted as they are: --low_cpu_mem_usage, --use_peft
// with --peft_target_dir, switches given as Python booleans (--strict False), --debug, --save_intermediate, and
// `test` on a folder that is already merged.

#include "hfmodels.h"
#include "testutil.h"

#include "formats/safetensors_reader.h"
#include "formats/safetensors_writer.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <filesystem>

#include <unistd.h>

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

std::string actor(const char* c) { return fixture(std::string(c) + "/global_step_10/actor"); }
const char* kMegatron = "megatron_legacy_qwen2_tp2_pp2";

/// The mapping fixture has no biases to ignore; a rules file that adds nothing is a valid --param_mapping.
std::string emptyRules()
{
    const std::string path = makeTempDir() + "/custom_mapping.json";
    writeFile(path, "{}\n");
    return path;
}

} // namespace

class TestCliCompat : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void lowCpuMemUsageIsAccepted()
    {
        const std::string out = makeTempDir() + "/out";
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--backend", "megatron", "--local_dir", actor(kMegatron), "--target_dir", out,
                                "--low_cpu_mem_usage" }),
                            &o, &e),
                 0);
        QCOMPARE(readFile(out + "/model.safetensors"), readFile(fixture(std::string(kMegatron) + "/reference/model.safetensors")));
        QCOMPARE(runTessera(A({ "merge", "--help" }), &o, &e), 0);
        QVERIFY(o.contains(QStringLiteral("--low_cpu_mem_usage")) && o.contains(QStringLiteral("always streams")));
    }

    void usePeftWithPeftTargetDir()
    {
        const std::string out = makeTempDir() + "/out", lora = makeTempDir() + "/out_lora";
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--backend", "fsdp", "--local_dir", actor("lora_llama_w2_fp32"), "--target_dir",
                                out, "--use_peft", "--peft_target_dir", lora }),
                            &o, &e),
                 0);
        QVERIFY(fs::exists(out + "/model.safetensors"));
        QVERIFY(!fs::exists(out + "/lora_adapter"));
        QCOMPARE(readFile(lora + "/adapter_model.safetensors"),
                 readFile(fixture("lora_llama_w2_fp32/reference_adapter/adapter_model.safetensors")));
        QVERIFY(fs::exists(lora + "/adapter_config.json"));
        // --use_peft on a checkpoint without an adapter says so.
        QCOMPARE(runTessera(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", makeTempDir() + "/x",
                                "--use_peft" }),
                            &o, &e),
                 2);
        QVERIFY2(e.contains(QStringLiteral("no LoRA tensors")), qPrintable(e));
    }

    // The adapter is published after the fused model; a --peft_target_dir it cannot go into is refused before the
    // fused model is written, not after it is published.
    void peftTargetDirIsCheckedBeforeAnythingIsWritten_data()
    {
        QTest::addColumn<QString>("adapter"); // relative to a fresh folder; the target is "out"
        QTest::addColumn<QString>("message");
        QTest::newRow("a file") << QStringLiteral("file") << QStringLiteral("exists and is not a folder");
        QTest::newRow("under a file") << QStringLiteral("file/adapter") << QStringLiteral("is not a folder");
        QTest::newRow("the target") << QStringLiteral("out") << QStringLiteral("is the --target_dir");
        QTest::newRow("the target, spelled otherwise") << QStringLiteral("./out/") << QStringLiteral("is the --target_dir");
        QTest::newRow("inside the target") << QStringLiteral("out/adapter") << QStringLiteral("is inside the --target_dir");
        QTest::newRow("another model's folder") << QStringLiteral("model") << QStringLiteral("weight files");
        if (::geteuid() != 0) // root writes anywhere
            QTest::newRow("read-only") << QStringLiteral("readonly") << QStringLiteral("cannot write");
    }
    void peftTargetDirIsCheckedBeforeAnythingIsWritten()
    {
        QFETCH(QString, adapter);
        QFETCH(QString, message);
        const std::string root = makeTempDir();
        writeFile(root + "/file", "x");
        fs::create_directories(root + "/model");
        writeFile(root + "/model/model.safetensors", "x");
        fs::create_directories(root + "/readonly");
        fs::permissions(root + "/readonly", fs::perms::owner_read | fs::perms::owner_exec);
        const std::string out = root + "/out";
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--local_dir", actor("lora_llama_w2_fp32"), "--target_dir", out,
                                "--peft_target_dir", root + "/" + adapter.toStdString() }),
                            &o, &e),
                 1);
        QVERIFY2(e.contains(QStringLiteral("--peft_target_dir")) && e.contains(message), qPrintable(e));
        QVERIFY(!fs::exists(out));
        QCOMPARE(readFile(root + "/file"), std::string("x"));
        fs::permissions(root + "/readonly", fs::perms::owner_all);
    }

    void switchesTakePythonBooleans_data()
    {
        QTest::addColumn<QStringList>("form");
        QTest::addColumn<bool>("strict");
        QTest::newRow("--strict False") << QStringList { QStringLiteral("--strict"), QStringLiteral("False") } << false;
        QTest::newRow("--strict false") << QStringList { QStringLiteral("--strict"), QStringLiteral("false") } << false;
        QTest::newRow("--strict 0") << QStringList { QStringLiteral("--strict"), QStringLiteral("0") } << false;
        QTest::newRow("--strict=False") << QStringList { QStringLiteral("--strict=False") } << false;
        QTest::newRow("--strict True") << QStringList { QStringLiteral("--strict"), QStringLiteral("True") } << true;
        QTest::newRow("--strict=true") << QStringList { QStringLiteral("--strict=true") } << true;
        QTest::newRow("--strict 1") << QStringList { QStringLiteral("--strict"), QStringLiteral("1") } << true;
        QTest::newRow("--strict") << QStringList { QStringLiteral("--strict") } << true;
    }

    void switchesTakePythonBooleans()
    {
        QFETCH(QStringList, form);
        QFETCH(bool, strict);
        // A Megatron checkpoint with an unmapped extra tensor: strict refuses it, not strict writes the rest.
        const std::string dir = copyFixtureFolder(kMegatron);
        const std::string rules = makeTempDir() + "/rules.json";
        // Rules that drop the final norm's mapping leave decoder.final_layernorm.weight unmapped.
        writeFile(rules, R"({"rules": [{"id": "final_norm", "megatron": "decoder.final_layernorm.weight", "hf": "unused.weight"}]})");
        QStringList args = A({ "merge", "--backend", "megatron", "--local_dir", dir + "/global_step_10/actor",
                               "--target_dir", makeTempDir() + "/out", "--param_mapping", rules, "--quiet" });
        args << form;
        QString o, e;
        const int code = runTessera(args, &o, &e);
        QCOMPARE(code, strict ? 1 : 0);
    }

    void badBooleanIsAUsageError()
    {
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--local_dir", actor(kMegatron), "--target_dir", makeTempDir() + "/o",
                                "--strict=maybe" }),
                            &o, &e),
                 2);
        QVERIFY(e.contains(QStringLiteral("true/false")));
    }

    void debugLogsFilesRulesPlansAndStages()
    {
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--backend", "megatron", "--local_dir", actor(kMegatron), "--target_dir",
                                makeTempDir() + "/out", "--debug", "--quiet" }),
                            &o, &e),
                 0);
        for (const char* expected : { "read ", "mp_rank_00_000/model.pt (megatron-legacy)", "map decoder.layers.0.self_attention.linear_qkv.weight -> model.layers.0.self_attn.q_proj.weight",
                                      "rule qkv_weight", "tensor model.layers.0.self_attn.q_proj.weight", "piece [",
                                      "stage scan took", "stage map took", "stage plan took", "stage write took" })
            QVERIFY2(e.contains(QString::fromUtf8(expected)), expected);
    }

    void saveIntermediateWritesTheReport()
    {
        const std::string out = makeTempDir() + "/out";
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--backend", "megatron", "--local_dir", actor(kMegatron), "--target_dir", out,
                                "--param_mapping", emptyRules(), "--ignore_missing_params", ".*bias",
                                "--save_intermediate" }),
                            &o, &e),
                 0);
        const auto report = nlohmann::json::parse(readFile(out + "/merge_report.json"));
        auto written = scanSafetensorsFolder(out);
        QVERIFY_RESULT(written);
        const auto& tensors = report["models"][0]["tensors"];
        QCOMPARE(tensors.size(), written->tensors.size());
        for (const auto& t : tensors) {
            QVERIFY(t.contains("crc32") && t["crc32"].get<std::string>().size() == 8);
            QVERIFY(t.contains("steps") && !t["steps"].empty());
            QVERIFY2(t.contains("rule"), t["name"].get<std::string>().c_str());
        }
        QVERIFY(o.contains(QStringLiteral("merge_report.json")));
    }

    void testOnAnAlreadyMergedFolder()
    {
        const std::string merged = makeTempDir() + "/merged_model";
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", merged, "--quiet" }), &o, &e), 0);
        QCOMPARE(runTessera(A({ "test", "--backend", "fsdp", "--local_dir", merged, "--test_hf_dir",
                                fixture("fsdp2_llama_w4/reference") }),
                            &o, &e),
                 0);
        QVERIFY2(e.contains(QStringLiteral("not needed")), qPrintable(e));
        QVERIFY(o.contains(QStringLiteral("OK: ")));
    }

    void forcedTieOnAnUntiedModelWhoseHeadDiffersIsRefused()
    {
        const std::string out = makeTempDir() + "/out";
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", out, "--tie-word-embedding" }),
                            &o, &e),
                 1);
        QVERIFY2(e.contains(QStringLiteral("would replace the trained output head")), qPrintable(e));
        QVERIFY(!fs::exists(out));
    }

    // A config.json that says tied over a checkpoint whose lm_head was trained on its own: dropping the head would
    // lose it, so the merge (and the GGUF export) refuses, says what to do, and writes nothing.
    void tiedConfigOverADifferentTrainedHeadIsRefused()
    {
        const std::string dir = copyFixtureFolder("gguf_llama_w2_fp32/reference");
        std::string config = readFile(dir + "/config.json");
        const std::string untied = "\"tie_word_embeddings\": false";
        QVERIFY(config.find(untied) != std::string::npos);
        config.replace(config.find(untied), untied.size(), "\"tie_word_embeddings\": true");
        writeFile(dir + "/config.json", config);
        for (const char* format : { "safetensors", "gguf" }) {
            const std::string out = makeTempDir() + "/out";
            QString o, e;
            QCOMPARE(runTessera(A({ "merge", "--local_dir", dir, "--target_dir", out, "--format", format }), &o, &e), 1);
            QVERIFY2(e.contains(QStringLiteral("lm_head.weight differs from model.embed_tokens.weight"))
                         && e.contains(QStringLiteral("would be lost"))
                         && e.contains(QStringLiteral("set \"tie_word_embeddings\": false")),
                     qPrintable(e));
            QVERIFY(!fs::exists(out));
        }
        // `test` runs the same merge: against a reference without the head, it fails for the same reason.
        const std::string reference = copyHfModelWithout(dir, { "lm_head.weight" });
        QString o, e;
        QCOMPARE(runTessera(A({ "test", "--local_dir", dir, "--test_hf_dir", reference }), &o, &e), 1);
        QVERIFY2(o.contains(QStringLiteral("would be lost")), qPrintable(o + e));
    }

    void forcedTieWritesATiedConfig()
    {
        // A Hugging Face folder whose config says untied but whose head is the embedding.
        const std::string dir = makeTempDir() + "/model";
        fs::create_directories(dir);
        writeFile(dir + "/config.json", "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"tie_word_embeddings\": false\n}\n");
        auto status = writeSafetensorsFile(dir + "/model.safetensors",
                                           { { "model.embed_tokens.weight", DType::Float32, { 4, 2 } },
                                             { "lm_head.weight", DType::Float32, { 4, 2 } } },
                                           { { "format", "pt" } }, [](std::size_t, std::uint8_t* dst, std::uint64_t n) {
                                               for (std::uint64_t i = 0; i < n; ++i)
                                                   dst[i] = static_cast<std::uint8_t>(i);
                                               return Status::success();
                                           });
        QVERIFY_RESULT(status);
        const std::string out = makeTempDir() + "/out";
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--local_dir", dir, "--target_dir", out, "--tie-word-embedding", "--quiet" }), &o, &e), 0);
        const auto config = nlohmann::json::parse(readFile(out + "/config.json"));
        QCOMPARE(config["tie_word_embeddings"].get<bool>(), true);
        auto merged = scanSafetensorsFolder(out);
        QVERIFY_RESULT(merged);
        QVERIFY(!merged->find("lm_head.weight"));
    }

    void testComparesDifferentDtypesAtTheNarrowerOne()
    {
        const std::string bf16 = makeTempDir() + "/bf16";
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--local_dir", actor("fsdp2_qwen2_w2_fp32"), "--target_dir", bf16, "--dtype", "bf16",
                                "--quiet" }),
                            &o, &e),
                 0);
        // The fp32 checkpoint against its bf16 merge, and the bf16 merge against the fp32 reference.
        QCOMPARE(runTessera(A({ "test", "--local_dir", actor("fsdp2_qwen2_w2_fp32"), "--test_hf_dir", bf16 }), &o, &e), 0);
        QVERIFY2(o.contains(QStringLiteral("compared as bfloat16: the merge is float32, the reference bfloat16")), qPrintable(o));
        QCOMPARE(runTessera(A({ "test", "--local_dir", bf16, "--test_hf_dir", fixture("fsdp2_qwen2_w2_fp32/reference") }), &o, &e),
                 0);
        QVERIFY(o.contains(QStringLiteral("compared as bfloat16: the merge is bfloat16, the reference float32")));
    }

    void uploadMessageNamesTheRepo()
    {
        QString o, e;
        QCOMPARE(runTessera(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", "out",
                                "--hf_upload_path", "me/my-model" }),
                            &o, &e),
                 2);
        QVERIFY2(e.contains(QStringLiteral("huggingface-cli upload me/my-model out")), qPrintable(e));
    }
};

QTEST_GUILESS_MAIN(TestCliCompat)
#include "tst_cli_compat.moc"
