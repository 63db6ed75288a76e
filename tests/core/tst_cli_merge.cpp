// SPDX-License-Identifier: GPL-3.0-or-later
// `tessera merge` and `tessera test` as users run them: verl's flags, exit codes, outputs on the fixtures.

#include "hfmodels.h"
#include "testutil.h"

#include "formats/safetensors_reader.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <filesystem>

using namespace tessera;
namespace fs = std::filesystem;

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
using test::A;
std::string actor(const char* c) { return test::fixture(std::string(c) + "/global_step_10/actor"); }

/// `hf` split into `format` rank files (what training would have saved), with `drop` missing from the model.
std::string splitWithout(const std::string& hf, const std::string& format, const std::string& drop)
{
    const std::string out = test::makeTempDir() + "/" + format;
    QString stdOut, stdErr;
    const int code = test::runTessera(A({ "split", "--hf_dir", hf, "--target_dir", out, "--format", format,
                                          "--world_size", "2", "--ignore_missing_params", "^" + drop + "$", "--quiet" }),
                                      &stdOut, &stdErr);
    if (code != 0)
        qFatal("split: %s", qPrintable(stdErr));
    return out;
}
} // namespace

class TestCliMerge : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void mergesEveryFixtureBitExact_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("reference");
        for (const char* c : { "fsdp2_llama_w4", "fsdp2_qwen2_w2_fp32", "fsdp1_llama_w2_dtensor", "hsdp_qwen2_2x2" }) {
            QTest::newRow(c) << A({ "--local_dir", q(actor(c)) }) << q(test::fixture(std::string(c) + "/reference"));
            if (fs::exists(test::fixture(std::string(c) + "/dcp")))
                QTest::newRow((std::string(c) + "/dcp").c_str())
                    << A({ "--local-dir", q(test::fixture(std::string(c) + "/dcp")), "--hf-model-path",
                                     q(actor(c) + "/huggingface") })
                    << q(test::fixture(std::string(c) + "/reference"));
        }
    }
    void mergesEveryFixtureBitExact()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, reference);
        const std::string out = test::makeTempDir() + "/merged";
        QString stdOut, stdErr;
        const int code = test::runTessera(A({ "merge" }) + args + A({ "--target_dir", q(out), "--quiet" }),
                                          &stdOut, &stdErr);
        QVERIFY2(code == 0, qPrintable(stdErr));
        for (const auto& entry : fs::directory_iterator(reference.toStdString())) {
            const std::string name = entry.path().filename().string();
            QVERIFY2(test::readFile(entry.path().string()) == test::readFile(out + "/" + name), name.c_str());
        }
    }

    void testPassesAndFailsWithReport()
    {
        const std::string ref = test::fixture("fsdp2_llama_w4/reference");
        QString stdOut, stdErr;
        QCOMPARE(test::runTessera(A({ "test", "--local_dir", q(actor("fsdp2_llama_w4")), "--test_hf_dir", q(ref) }), &stdOut,
                                  &stdErr),
                 0);
        QVERIFY(stdOut.contains(QStringLiteral("OK: 39 of 39")));
        // A deliberately different reference: one byte of one tensor changed.
        const std::string bad = test::makeTempDir();
        fs::copy(ref, bad, fs::copy_options::recursive);
        fs::permissions(bad + "/model.safetensors", fs::perms::owner_write, fs::perm_options::add);
        auto header = readSafetensorsFile(bad + "/model.safetensors");
        QVERIFY_RESULT(header);
        std::string bytes = test::readFile(bad + "/model.safetensors");
        std::string changed;
        for (const auto& t : header->tensors)
            if (t.name == "model.layers.1.mlp.up_proj.weight") {
                bytes[t.begin + 100] ^= 0x01; // lowest mantissa bit of element 50
                changed = t.name;
            }
        QVERIFY(!changed.empty());
        test::writeFile(bad + "/model.safetensors", bytes);
        QCOMPARE(test::runTessera(A({ "test", "--local-dir", q(actor("fsdp2_llama_w4")), "--test-hf-dir", q(bad) }), &stdOut,
                                  &stdErr),
                 1);
        QVERIFY2(stdOut.contains(QStringLiteral("FAIL  model.layers.1.mlp.up_proj.weight: DIFFERENT: 1 of")), qPrintable(stdOut));
        QVERIFY(stdOut.contains(QStringLiteral("FAILED: 38 of 39")));
        // A tolerance large enough accepts it.
        QCOMPARE(test::runTessera(A({ "test", "--local_dir", q(actor("fsdp2_llama_w4")), "--test_hf_dir", q(bad), "--atol",
                                    "0.01" }),
                                  &stdOut, &stdErr),
                 0);
    }

    void dryRunPrintsPlan()
    {
        QString stdOut, stdErr;
        const std::string out = test::makeTempDir() + "/never";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", q(actor("hsdp_qwen2_2x2")), "--target_dir", q(out),
                                    "--dry-run", "--json", "--max_shard_size", "100KB" }),
                                  &stdOut, &stdErr),
                 0);
        const auto json = QJsonDocument::fromJson(stdOut.toUtf8()).object();
        QVERIFY(json.value(QStringLiteral("files")).toArray().size() > 1);
        QCOMPARE(json.value(QStringLiteral("tensors")).toArray().size(), 51);
        QVERIFY(!fs::exists(out));
    }

    void shardedOutputLoadsThroughIndex()
    {
        QString stdOut, stdErr;
        const std::string out = test::makeTempDir() + "/sharded";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", q(actor("fsdp2_qwen2_w2_fp32")), "--target_dir", q(out),
                                    "--max_shard_size", "200KB", "--quiet" }),
                                  &stdOut, &stdErr),
                 0);
        QVERIFY(fs::exists(out + "/model.safetensors.index.json"));
        QVERIFY(!fs::exists(out + "/model.safetensors"));
        auto model = scanSafetensorsFolder(out);
        QVERIFY_RESULT(model);
        QVERIFY(model->problems.empty());
        QCOMPARE(model->tensors.size(), std::size_t(51));
        for (const auto& entry : fs::directory_iterator(out))
            if (entry.path().extension() == ".safetensors")
                QVERIFY_RESULT(readSafetensorsFile(entry.path().string()));
        QCOMPARE(test::runTessera(A({ "test", "--local_dir", q(actor("fsdp2_qwen2_w2_fp32")), "--test_hf_dir", q(out) }),
                                  &stdOut, &stdErr),
                 0);
    }

    void convertsDtype()
    {
        QString stdOut, stdErr;
        const std::string out = test::makeTempDir() + "/bf16";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", q(actor("fsdp2_qwen2_w2_fp32")), "--target_dir", q(out),
                                    "--dtype", "bf16", "--quiet" }),
                                  &stdOut, &stdErr),
                 0);
        QVERIFY(test::readFile(out + "/config.json").find("\"torch_dtype\": \"bfloat16\"") != std::string::npos);
        auto header = readSafetensorsFile(out + "/model.safetensors");
        QVERIFY_RESULT(header);
        for (const auto& t : header->tensors)
            QCOMPARE(t.dtype, DType::BFloat16);
    }

    /// Every numeric option takes a plain number in its range, or is refused naming the range and what it got:
    /// never "1e3" read as 1, 2^32 + 1 wrapped to 1, "-1" or "" read as 0, NaN or inf taken as a tolerance.
    void numericOptionsAreStrict_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        const std::string a = actor("fsdp2_llama_w4");
        const std::string out = test::makeTempDir() + "/out";
        const QStringList merge = A({ "merge", "--local_dir", a, "--target_dir", out, "--dry-run" });
        const QStringList split = A({ "split", "--local_dir", a, "--target_dir", out, "--dry-run" });
        const QStringList megatron = split + A({ "--format", "megatron" });
        auto row = [](const std::string& name, const QStringList& args, const QString& message) {
            QTest::newRow(name.c_str()) << args << message;
        };
        auto got = [](const char* format, const char* value) { return QString::fromUtf8(format).arg(QLatin1String(value)); };
        const char* threads = "--threads must be a whole number from 1 to 1024 (got '%1')";
        for (const char* bad : { "1e3", "4294967297", "-1", "", "0", " 4", "+4", "4.0", "0x4", "1025" }) {
            row("merge --threads '" + std::string(bad) + "'", merge + A({ "--threads", bad }), got(threads, bad));
            row("inspect --threads '" + std::string(bad) + "'", A({ "inspect", a, "--threads", bad }), got(threads, bad));
        }
        row("diff --threads", A({ "diff", a, a, "--threads", "1e3" }), got(threads, "1e3"));
        row("test --threads", A({ "test", "--local_dir", a, "--test_hf_dir", a, "--threads", "1e3" }), got(threads, "1e3"));
        row("split --threads", split + A({ "--world_size", "2", "--threads", "4294967297" }), got(threads, "4294967297"));
        row("split --world_size 1e3", split + A({ "--world_size", "1e3" }),
            QStringLiteral("--world_size must be a whole number from 1 to 1000000 (got '1e3')"));
        row("split --world_size 2^32+1", split + A({ "--world_size", "4294967297" }),
            QStringLiteral("--world_size must be a whole number from 1 to 1000000"));
        row("split --tp 2.0", megatron + A({ "--tp", "2.0" }),
            QStringLiteral("--tp must be a whole number from 1 to 1000000 (got '2.0')"));
        row("split --pp +2", megatron + A({ "--pp", "+2" }), QStringLiteral("--pp must be a whole number"));
        row("split --iteration 1e3", megatron + A({ "--iteration", "1e3" }),
            QStringLiteral("--iteration must be a whole number from 0 to 9999999"));
        row("split --num_layers_in_first_pipeline_stage -1",
            megatron + A({ "--num_layers_in_first_pipeline_stage", "-1" }),
            QStringLiteral("--num_layers_in_first_pipeline_stage must be a whole number from 0"));
        row("split --mesh 2x+2", split + A({ "--mesh", "2x+2" }), QStringLiteral("--mesh must be sizes like 2x2"));
        row("merge --parts 1e3", merge + A({ "--part", "auto", "--parts", "1e3" }),
            QStringLiteral("--parts must be a positive whole number (got '1e3')"));
        for (const char* bad : { "nan", "inf", "-1", "0x1p3", " 1", "1e999", "" }) {
            row("diff --atol '" + std::string(bad) + "'", A({ "diff", a, a, "--atol", bad }),
                got("--atol must be a number of 0 or more (got '%1')", bad));
            row("test --rtol '" + std::string(bad) + "'", A({ "test", "--local_dir", a, "--test_hf_dir", a, "--rtol", bad }),
                got("--rtol must be a number of 0 or more (got '%1')", bad));
        }
        row("merge --lora_alpha inf", merge + A({ "--lora_alpha", "inf" }),
            QStringLiteral("--lora_alpha must be a number above 0 and at most 1e+09"));
    }

    void numericOptionsAreStrict()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        QString out, err;
        QCOMPARE(test::runTessera(args, &out, &err), 2);
        QVERIFY2(err.contains(message), qPrintable(err));
    }

    void numericOptionsTakeWhatTheyShould()
    {
        const std::string a = actor("fsdp2_llama_w4");
        QString out, err;
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", a, "--target_dir", test::makeTempDir() + "/o", "--dry-run",
                                      "--threads", "1024" }), &out, &err), 0);
        QCOMPARE(test::runTessera(A({ "diff", a, a, "--threads", "3", "--atol", "1e-5", "--rtol", "0.5" }), &out, &err),
                 0);
        QCOMPARE(test::runTessera(A({ "inspect", a, "--threads", "1" }), &out, &err), 0);
    }

    /// Two mesh dims of one name (or one without a name) cannot be told apart by DeviceMesh: refused by name.
    void duplicateMeshDimNamesAreRefused()
    {
        const std::string a = actor("fsdp2_llama_w4");
        QString out, err;
        QCOMPARE(test::runTessera(A({ "split", "--local_dir", a, "--target_dir", test::makeTempDir() + "/o", "--mesh",
                                      "2x2", "--mesh_dim_names", "a,a", "--dry-run" }), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("--mesh_dim_names names 'a' twice")), qPrintable(err));
        QCOMPARE(test::runTessera(A({ "split", "--local_dir", a, "--target_dir", test::makeTempDir() + "/o", "--mesh",
                                      "2x2", "--mesh_dim_names", "ddp,", "--dry-run" }), &out, &err), 1);
        QVERIFY2(err.contains(QStringLiteral("--mesh_dim_names has an empty name")), qPrintable(err));
        QCOMPARE(test::runTessera(A({ "split", "--local_dir", a, "--target_dir", test::makeTempDir() + "/o", "--mesh",
                                      "2x2", "--mesh_dim_names", "dp,shard", "--dry-run" }), &out, &err), 0);
    }

    // A checkpoint saved without one of the parameters its config.json describes (a layer's down_proj, an untied
    // lm_head) is not the model: inspect lists it as a problem, merge refuses it and writes nothing.
    void refusesModelMissingParameters_data()
    {
        QTest::addColumn<QString>("layout");
        QTest::addColumn<QString>("missing");
        for (const char* layout : { "hf", "fsdp", "dcp" })
            for (const char* missing : { "model.layers.1.mlp.down_proj.weight", "lm_head.weight",
                                         "model.layers.0.self_attn.k_proj.bias" })
                QTest::addRow("%s without %s", layout, missing) << QString::fromUtf8(layout) << QString::fromUtf8(missing);
    }
    void refusesModelMissingParameters()
    {
        QFETCH(QString, layout);
        QFETCH(QString, missing);
        // qwen2 has q/k/v biases: a bias is a parameter of the family like any other.
        const std::string hf = test::copyHfModelWithout(test::fixture("fsdp2_qwen2_w2_fp32/reference"),
                                                        { missing.toStdString() });
        const std::string checkpoint = layout == QLatin1String("hf") ? hf : splitWithout(hf, layout.toStdString(), missing.toStdString());
        QString stdOut, stdErr;
        QCOMPARE(test::runTessera(A({ "inspect", checkpoint }), &stdOut, &stdErr), 1);
        QVERIFY2(stdOut.contains(QStringLiteral("Problems    1")), qPrintable(stdOut));
        QVERIFY2(stdOut.contains(missing + QStringLiteral(": missing: ")), qPrintable(stdOut));
        const std::string out = test::makeTempDir() + "/merged";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", checkpoint, "--target_dir", out }), &stdOut, &stdErr), 1);
        QVERIFY2(stdErr.contains(missing + QStringLiteral(": missing: ")), qPrintable(stdErr));
        QVERIFY(!fs::exists(out));
        QCOMPARE(test::runTessera(A({ "test", "--local_dir", checkpoint, "--test_hf_dir",
                                      test::fixture("fsdp2_qwen2_w2_fp32/reference") }),
                                  &stdOut, &stdErr),
                 1);
        // Told that it may be missing, the merge writes the rest.
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", checkpoint, "--target_dir", out, "--quiet",
                                      "--ignore_missing_params", missing }),
                                  &stdOut, &stdErr),
                 0);
        auto merged = scanSafetensorsFolder(out);
        QVERIFY_RESULT(merged);
        QCOMPARE(merged->tensors.size(), std::size_t(50));
        QVERIFY(!merged->find(missing.toStdString()));
    }

    // A value model (verl's critic) has score.weight instead of lm_head: known by that head, by a classification
    // architecture in config.json, or by --is-value-model; without its head it is refused like any other.
    void valueModelNeedsItsScoreHead()
    {
        const std::string critic = std::string(TESSERA_TEST_DATA_DIR) + "/fsdp2_qwen2_critic_w2/reference";
        QString stdOut, stdErr;
        QCOMPARE(test::runTessera(A({ "inspect", critic }), &stdOut, &stdErr), 0);
        const std::string headless = test::copyHfModelWithout(critic, { "score.weight" });
        QCOMPARE(test::runTessera(A({ "inspect", headless, "--is_value_model" }), &stdOut, &stdErr), 1);
        QVERIFY2(stdOut.contains(QStringLiteral("score.weight: missing: ")), qPrintable(stdOut));
        std::string config = test::readFile(headless + "/config.json");
        config.replace(config.find("Qwen2ForCausalLM"), 16, "Qwen2ForTokenClassification");
        test::writeFile(headless + "/config.json", config);
        QCOMPARE(test::runTessera(A({ "inspect", headless }), &stdOut, &stdErr), 1);
        QVERIFY2(stdOut.contains(QStringLiteral("score.weight: missing: ")) && !stdOut.contains(QStringLiteral("lm_head")),
                 qPrintable(stdOut));
        const std::string out = test::makeTempDir() + "/merged";
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", headless, "--target_dir", out }), &stdOut, &stdErr), 1);
        QVERIFY(!fs::exists(out));
    }

    // The parameters of an architecture Tessera has no list for cannot be checked: the merge says so and goes on.
    void warnsWhenParametersCannotBeChecked()
    {
        const std::string hf = test::copyHfModelWithout(test::fixture("fsdp2_llama_w4/reference"), {});
        std::string config = test::readFile(hf + "/config.json");
        for (const auto& [from, to] : { std::pair<std::string, std::string> { "LlamaForCausalLM", "NovelForCausalLM" },
                                        { "\"llama\"", "\"novel\"" } }) {
            const auto at = config.find(from);
            QVERIFY(at != std::string::npos);
            config.replace(at, from.size(), to);
        }
        test::writeFile(hf + "/config.json", config);
        QString stdOut, stdErr;
        QCOMPARE(test::runTessera(A({ "inspect", hf }), &stdOut, &stdErr), 0);
        QVERIFY2(stdOut.contains(QStringLiteral("Warning     ")) && stdOut.contains(QStringLiteral("NovelForCausalLM"))
                     && stdOut.contains(QStringLiteral("not checked for missing parameters")),
                 qPrintable(stdOut));
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", hf, "--target_dir", test::makeTempDir() + "/out" }), &stdOut,
                                  &stdErr),
                 0);
        QVERIFY2(stdErr.contains(QStringLiteral("warning: ")) && stdErr.contains(QStringLiteral("not checked for missing parameters")),
                 qPrintable(stdErr));
    }

    // Merging model A into a folder that holds model B's tokenizer (or chat template, generation config…) would
    // publish A's weights with B's tokenizer: refused, naming the files, before anything is written. Files the merge
    // writes itself (a merge run again) and files that are no part of a model are no reason to refuse.
    void refusesATargetHoldingAnotherModelsTokenizer()
    {
        const std::string target = test::makeTempDir() + "/target";
        fs::create_directories(target);
        fs::copy_file(test::fixture("gguf_llama_w2_fp32/reference/tokenizer.json"), target + "/tokenizer.json");
        test::writeFile(target + "/chat_template.jinja", "{{ messages }}");
        test::writeFile(target + "/notes.txt", "mine\n");
        for (const char* dryRun : { "--dry-run", "--quiet" }) {
            QString stdOut, stdErr;
            QCOMPARE(test::runTessera(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", target, dryRun }),
                                      &stdOut, &stdErr),
                     1);
            QVERIFY2(stdErr.contains(QStringLiteral("(chat_template.jinja, tokenizer.json)"))
                         && stdErr.contains(QStringLiteral("another model's")),
                     qPrintable(stdErr));
        }
        QVERIFY(!fs::exists(target + "/model.safetensors"));
        QVERIFY(!fs::exists(target + "/config.json"));
        fs::remove(target + "/tokenizer.json");
        fs::remove(target + "/chat_template.jinja");
        for (int run = 0; run < 2; ++run) {
            QString stdOut, stdErr;
            QCOMPARE(test::runTessera(A({ "merge", "--local_dir", actor("fsdp2_llama_w4"), "--target_dir", target, "--quiet" }),
                                      &stdOut, &stdErr),
                     0);
            QVERIFY(fs::exists(target + "/tokenizer_config.json") && fs::exists(target + "/notes.txt"));
        }
    }

    void usageErrors()
    {
        QCOMPARE(test::runTessera(A({ "merge", "--target_dir", "x" })), 2);
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", q(actor("fsdp2_llama_w4")), "--dtype", "int3" })), 2);
        QCOMPARE(test::runTessera(A({ "merge", "--local_dir", q(actor("fsdp2_llama_w4")), "--max_shard_size", "5G" })), 2);
        QCOMPARE(test::runTessera(A({ "test", "--local_dir", q(actor("fsdp2_llama_w4")) })), 2);
        QCOMPARE(test::runTessera(A({ "merge", "--backend", "dcp", "--local_dir", q(actor("fsdp2_llama_w4")), "--target_dir",
                                    q(test::makeTempDir() + "/x") })),
                 1);
    }
};

QTEST_GUILESS_MAIN(TestCliMerge)
#include "tst_cli_merge.moc"
