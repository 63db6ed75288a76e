// SPDX-License-Identifier: GPL-3.0-or-later
// `tessera diff A B` as users run it: exit codes, the table, --failures_only and --json.

#include "testutil.h"

#include "model/convert.h"
#include "formats/safetensors_reader.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <filesystem>

using namespace tessera;
namespace fs = std::filesystem;

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
QString actor(const char* c) { return q(test::fixture(std::string(c) + "/global_step_10/actor")); }
QString reference(const char* c) { return q(test::fixture(std::string(c) + "/reference")); }

/// A copy of hsdp_qwen2_2x2/reference with element 5 of `tensor` changed by +1 (bf16).
QString changedReference(const std::string& tensor)
{
    const std::string dir = test::makeTempDir() + "/changed";
    fs::create_directories(dir);
    const std::string file = dir + "/model.safetensors";
    fs::copy_file(test::fixture("hsdp_qwen2_2x2/reference/model.safetensors"), file);
    fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
    auto header = readSafetensorsFile(file);
    if (!header)
        qFatal("%s", header.error().message.c_str());
    std::string bytes = test::readFile(file);
    for (const auto& t : header->tensors)
        if (t.name == tensor) {
            char* p = bytes.data() + t.begin + 5 * dtypeSize(t.dtype);
            double v = 0;
            (void)convertElements(p, t.dtype, &v, DType::Float64, 1);
            v += 1;
            (void)convertElements(&v, DType::Float64, p, t.dtype, 1);
        }
    test::writeFile(file, bytes);
    return q(dir);
}
} // namespace

class TestCliDiff : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void identicalExitsZero()
    {
        QString out, err;
        const int code = test::runTessera({ QStringLiteral("diff"), actor("hsdp_qwen2_2x2"), reference("hsdp_qwen2_2x2"),
                                            QStringLiteral("--quiet") },
                                          &out, &err);
        QVERIFY2(code == 0, qPrintable(err + out));
        QVERIFY(out.startsWith(QStringLiteral("STATUS")));
        QVERIFY(out.contains(QStringLiteral("identical")));
        QVERIFY(out.trimmed().split(QLatin1Char('\n')).last().startsWith(QStringLiteral("OK: 51 tensors: 51 identical")));
    }

    void differenceExitsOneAndJsonHasEveryField()
    {
        const std::string tensor = "model.layers.1.self_attn.o_proj.weight";
        const QString changed = changedReference(tensor);
        QString out, err;
        int code = test::runTessera({ QStringLiteral("diff"), actor("hsdp_qwen2_2x2"), changed,
                                      QStringLiteral("--failures_only"), QStringLiteral("--quiet") },
                                    &out, &err);
        QCOMPARE(code, 1);
        const QStringList lines = out.trimmed().split(QLatin1Char('\n'));
        QCOMPARE(lines.size(), 4); // header, the row, its detail, the summary
        QVERIFY(lines[1].startsWith(QStringLiteral("different")));
        QVERIFY(lines[1].endsWith(q(tensor)));
        QVERIFY(lines.last().startsWith(QStringLiteral("DIFFERENT: 51 tensors: 50 identical, 1 different")));

        code = test::runTessera({ QStringLiteral("diff"), actor("hsdp_qwen2_2x2"), changed, QStringLiteral("--json") },
                                &out, &err);
        QCOMPARE(code, 1);
        QJsonParseError error;
        const QJsonObject root = QJsonDocument::fromJson(out.toUtf8(), &error).object();
        QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
        QCOMPARE(root[QStringLiteral("ok")].toBool(), false);
        QCOMPARE(root[QStringLiteral("failures")].toInt(), 1);
        QCOMPARE(root[QStringLiteral("counts")].toObject()[QStringLiteral("identical")].toInt(), 50);
        QCOMPARE(root[QStringLiteral("layout_a")].toString(), QStringLiteral("verl-fsdp"));
        QCOMPARE(root[QStringLiteral("layout_b")].toString(), QStringLiteral("hf-safetensors"));
        const QJsonArray tensors = root[QStringLiteral("tensors")].toArray();
        QCOMPARE(tensors.size(), 51);
        bool found = false;
        for (const auto& value : tensors) {
            const QJsonObject t = value.toObject();
            for (const char* key : { "name", "status", "ok", "detail", "dtype_a", "dtype_b", "compared_as", "shape_a", "shape_b",
                                     "elements", "compared", "bit_equal", "max_abs_diff", "mean_abs_diff", "max_rel_diff",
                                     "cosine", "differing", "outside_tolerance", "worst_index", "a", "b" })
                QVERIFY2(t.contains(QLatin1String(key)), key);
            for (const char* key : { "min", "max", "mean", "std", "nan", "inf", "zeros", "finite" })
                QVERIFY2(t[QStringLiteral("a")].toObject().contains(QLatin1String(key)), key);
            if (t[QStringLiteral("name")].toString() != q(tensor))
                continue;
            found = true;
            QCOMPARE(t[QStringLiteral("status")].toString(), QStringLiteral("different"));
            QCOMPARE(t[QStringLiteral("differing")].toInt(), 1);
            QVERIFY(t[QStringLiteral("max_abs_diff")].toDouble() > 0.9);
            const QJsonArray worst = t[QStringLiteral("worst_index")].toArray();
            QCOMPARE(worst.size(), 2);
            QCOMPARE(worst[0].toInt(), 0);
            QCOMPARE(worst[1].toInt(), 5);
        }
        QVERIFY(found);

        // A tolerance that covers the change passes.
        code = test::runTessera({ QStringLiteral("diff"), actor("hsdp_qwen2_2x2"), changed, QStringLiteral("--atol"),
                                  QStringLiteral("2"), QStringLiteral("--quiet") },
                                &out, &err);
        QCOMPARE(code, 0);
        QVERIFY(out.contains(QStringLiteral("within tolerance")));
    }

    void missingTensorsFail()
    {
        // fsdp2_llama_w4 against a Qwen2 model: the names only partly overlap.
        QString out, err;
        const int code = test::runTessera({ QStringLiteral("diff"), actor("fsdp2_llama_w4"), reference("hsdp_qwen2_2x2"),
                                            QStringLiteral("--json") },
                                          &out, &err);
        QCOMPARE(code, 1);
        const QJsonObject root = QJsonDocument::fromJson(out.toUtf8()).object();
        const QJsonObject counts = root[QStringLiteral("counts")].toObject();
        QVERIFY(counts[QStringLiteral("missing in A")].toInt() > 0);
        // Said first, and plainly: these are two different models.
        QVERIFY2(err.contains(QStringLiteral("A and B are different models (config.json): architectures")), qPrintable(err));
        const QJsonArray models = root[QStringLiteral("config_differences")].toArray();
        QVERIFY(!models.isEmpty());
        QCOMPARE(models[0].toObject()[QStringLiteral("key")].toString(), QStringLiteral("architectures"));
    }

    void truncatedRankIsIncompleteOnTheCommandLine()
    {
        // Megatron TP rank 1 of stage 0 cut short: the tensors it shared are incomplete, in the text and the JSON.
        const std::string copy = test::copyFixtureFolder("megatron_legacy_qwen2_tp2_pp2");
        const std::string cut = copy + "/global_step_10/actor/model/mp_rank_01_000/model.pt";
        fs::resize_file(cut, fs::file_size(cut) / 2);
        const QString a = q(copy + "/global_step_10/actor");
        QString out, err;
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, reference("megatron_legacy_qwen2_tp2_pp2") }, &out, &err), 1);
        QVERIFY2(out.contains(QStringLiteral("incomplete")), qPrintable(out));
        QVERIFY2(out.contains(QStringLiteral("A has no data for")), qPrintable(out));
        // A few tensor problems are listed, the rest counted: each is in its row.
        QVERIFY2(err.contains(QStringLiteral("more tensors with problems")), qPrintable(err));
        QVERIFY(err.count(QStringLiteral("incomplete: ")) <= 3);

        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, reference("megatron_legacy_qwen2_tp2_pp2"),
                                    QStringLiteral("--json") },
                                  &out, &err),
                 1);
        const QJsonObject root = QJsonDocument::fromJson(out.toUtf8()).object();
        const int incomplete = root[QStringLiteral("counts")].toObject()[QStringLiteral("incomplete")].toInt();
        QVERIFY(incomplete > 0);
        qint64 missing = 0;
        for (const auto& t : root[QStringLiteral("tensors")].toArray())
            missing += t.toObject()[QStringLiteral("missing_a")].toInteger();
        QVERIFY(missing > 0);

        // `tessera test` refuses it, naming the incomplete tensors.
        QCOMPARE(test::runTessera({ QStringLiteral("test"), QStringLiteral("--backend"), QStringLiteral("megatron"),
                                    QStringLiteral("--local_dir"), a, QStringLiteral("--test_hf_dir"),
                                    reference("megatron_legacy_qwen2_tp2_pp2") },
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("incomplete: ")), qPrintable(err));
    }

    void loraFlagsReadTheCheckpointAsTestDoes()
    {
        // A LoRA run tested with α = 32 (the checkpoint records 16): the diff with the test's flags gives the
        // test's answer, 8 of the 39 tensors outside the tolerance.
        const QString a = actor("lora_llama_w2_fp32"), b = reference("lora_llama_w2_fp32");
        const QStringList flags { QStringLiteral("--atol"), QStringLiteral("1e-6"), QStringLiteral("--lora"),
                                  QStringLiteral("fused"), QStringLiteral("--lora_alpha"), QStringLiteral("32") };
        QString out, err;
        QCOMPARE(test::runTessera(QStringList { QStringLiteral("test"), QStringLiteral("--local_dir"), a,
                                                QStringLiteral("--test_hf_dir"), b, QStringLiteral("--quiet") } + flags,
                                  &out, &err),
                 1);
        QVERIFY2(out.contains(QStringLiteral("31 of 39 tensors match")), qPrintable(out + err));
        QCOMPARE(test::runTessera(QStringList { QStringLiteral("diff"), a, b, QStringLiteral("--quiet") } + flags, &out, &err), 1);
        QVERIFY2(out.contains(QStringLiteral("39 tensors: 31 identical, 8 different")), qPrintable(out + err));
        // Without them, the recorded α: every tensor passes.
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, b, QStringLiteral("--quiet"), QStringLiteral("--atol"),
                                    QStringLiteral("1e-6") },
                                  &out, &err),
                 0);
        // --lora adapter compares the PEFT adapter.
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, q(test::fixture("lora_llama_w2_fp32/reference_adapter")),
                                    QStringLiteral("--lora"), QStringLiteral("adapter"), QStringLiteral("--quiet") },
                                  &out, &err),
                 0);
        QVERIFY2(out.contains(QStringLiteral("OK: 16 tensors: 16 identical")), qPrintable(out + err));
        // The LoRA flags are for LoRA checkpoints.
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), actor("hsdp_qwen2_2x2"), reference("hsdp_qwen2_2x2"),
                                    QStringLiteral("--lora_alpha"), QStringLiteral("32"), QStringLiteral("--quiet") },
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("--lora_alpha is for LoRA checkpoints")), qPrintable(err));
    }

    void dtypeFlagsCompareAsTheTestDoes()
    {
        // An fp32 run against a bf16 model: the test compares at bf16 and passes; a plain diff says the dtypes
        // differ; with the test's flags the diff gives the test's answer.
        const QString a = actor("fsdp2_qwen2_w2_fp32");
        const QString bf16 = q(test::makeTempDir() + "/bf16");
        QString out, err;
        QCOMPARE(test::runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), a, QStringLiteral("--target_dir"),
                                    bf16, QStringLiteral("--dtype"), QStringLiteral("bf16"), QStringLiteral("--quiet") },
                                  &out, &err),
                 0);
        QCOMPARE(test::runTessera({ QStringLiteral("test"), QStringLiteral("--local_dir"), a, QStringLiteral("--test_hf_dir"),
                                    bf16, QStringLiteral("--quiet") },
                                  &out, &err),
                 0);
        QVERIFY2(out.contains(QStringLiteral("51 of 51 tensors match")), qPrintable(out + err));
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, bf16, QStringLiteral("--quiet") }, &out, &err), 1);
        QVERIFY2(out.contains(QStringLiteral("51 dtype mismatch")), qPrintable(out + err));
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, bf16, QStringLiteral("--round_to_narrower"),
                                    QStringLiteral("--quiet") },
                                  &out, &err),
                 0);
        QVERIFY2(out.contains(QStringLiteral("51 tensors: 51 identical")), qPrintable(out + err));
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, bf16, QStringLiteral("--round_to_narrower"),
                                    QStringLiteral("--json") },
                                  &out, &err),
                 0);
        const QJsonObject first = QJsonDocument::fromJson(out.toUtf8()).object()[QStringLiteral("tensors")].toArray()[0].toObject();
        QCOMPARE(first[QStringLiteral("compared_as")].toString(), QStringLiteral("bfloat16"));
        QCOMPARE(first[QStringLiteral("detail")].toString(), QStringLiteral("compared as bfloat16: A is float32, B bfloat16"));
        // --dtype converts A as the merge converts it: the same bytes as the bf16 merge.
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, bf16, QStringLiteral("--dtype"), QStringLiteral("bf16"),
                                    QStringLiteral("--quiet") },
                                  &out, &err),
                 0);
        QVERIFY2(out.contains(QStringLiteral("51 tensors: 51 identical")), qPrintable(out + err));
        // A in bf16 against the fp32 reference: the reference is rounded to bf16, as the test rounds it.
        const QString fp32 = reference("fsdp2_qwen2_w2_fp32");
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, fp32, QStringLiteral("--dtype"), QStringLiteral("bf16"),
                                    QStringLiteral("--quiet") },
                                  &out, &err),
                 1);
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, fp32, QStringLiteral("--dtype"), QStringLiteral("bf16"),
                                    QStringLiteral("--round_to_narrower"), QStringLiteral("--quiet") },
                                  &out, &err),
                 0);
        QVERIFY2(out.contains(QStringLiteral("51 tensors: 51 identical")), qPrintable(out + err));
    }

    void megatronBaseModelIsRefusedAsMergeRefusesIt()
    {
        // --base_model must be a Hugging Face model: diff and merge refuse a Megatron one in the same words, and the
        // merge writes nothing.
        const QString a = actor("lora_llama_w2_fp32"), megatron = actor("megatron_legacy_qwen2_tp2_pp2");
        const QString target = q(test::makeTempDir() + "/out");
        QString out, diffErr, mergeErr;
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), a, reference("lora_llama_w2_fp32"),
                                    QStringLiteral("--base_model"), megatron, QStringLiteral("--quiet") },
                                  &out, &diffErr),
                 1);
        QCOMPARE(test::runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), a, QStringLiteral("--target_dir"),
                                    target, QStringLiteral("--base_model"), megatron, QStringLiteral("--quiet") },
                                  &out, &mergeErr),
                 1);
        const QString why = QStringLiteral("is a Megatron checkpoint; merge it into a Hugging Face folder first");
        QVERIFY2(diffErr.contains(why), qPrintable(diffErr));
        QVERIFY2(mergeErr.contains(why), qPrintable(mergeErr));
        QVERIFY(!QFileInfo::exists(target));
    }

    void megatronIsMappedToHuggingFaceNames()
    {
        QString out, err;
        const int code = test::runTessera({ QStringLiteral("diff"), actor("megatron_legacy_qwen2_tp2_pp2"),
                                            reference("megatron_legacy_qwen2_tp2_pp2"), QStringLiteral("--quiet") },
                                          &out, &err);
        QVERIFY2(code == 0, qPrintable(err + out));
        QVERIFY(out.contains(QStringLiteral("model.layers.0.self_attn.q_proj.weight")));
    }

    void usageErrors_data()
    {
        QTest::addColumn<QStringList>("args");
        const QString a = actor("hsdp_qwen2_2x2"), b = reference("hsdp_qwen2_2x2");
        QTest::newRow("no B") << QStringList { QStringLiteral("diff"), a };
        QTest::newRow("negative atol") << QStringList { QStringLiteral("diff"), a, b, QStringLiteral("--atol"), QStringLiteral("-1") };
        QTest::newRow("bad rtol") << QStringList { QStringLiteral("diff"), a, b, QStringLiteral("--rtol=abc") };
        QTest::newRow("bad lora") << QStringList { QStringLiteral("diff"), a, b, QStringLiteral("--lora"), QStringLiteral("sideways") };
        QTest::newRow("bad lora_alpha") << QStringList { QStringLiteral("diff"), a, b, QStringLiteral("--lora_alpha"), QStringLiteral("-1") };
        QTest::newRow("bad dtype") << QStringList { QStringLiteral("diff"), a, b, QStringLiteral("--dtype"), QStringLiteral("int8") };
        QTest::newRow("unknown flag") << QStringList { QStringLiteral("diff"), a, b, QStringLiteral("--frobnicate") };
    }
    void usageErrors()
    {
        QFETCH(QStringList, args);
        QString out, err;
        QCOMPARE(test::runTessera(args, &out, &err), 2);
        QVERIFY(!err.isEmpty());
    }

    void unreadableInputExitsOne()
    {
        QString out, err;
        const int code = test::runTessera({ QStringLiteral("diff"), q(test::makeTempDir()), reference("hsdp_qwen2_2x2"),
                                            QStringLiteral("--json") },
                                          &out, &err);
        QCOMPARE(code, 1);
        QVERIFY(QJsonDocument::fromJson(out.toUtf8()).object().contains(QStringLiteral("error")));
    }
};

QTEST_GUILESS_MAIN(TestCliDiff)
#include "tst_cli_diff.moc"
