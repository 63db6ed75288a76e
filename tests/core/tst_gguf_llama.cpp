// SPDX-License-Identifier: GPL-3.0-or-later
// The real consumer: GGUF exports loaded by llama.cpp (node-llama-cpp's prebuilt binary), whose greedy
// continuation and log-probabilities must match a float64 reference (../shared/tools/gguf_check.mjs): the shared
// gguf_llama_w2_fp32 fixture (verl FSDP2 from real PyTorch), and tests/fixtures/gguf_families (Qwen2 with biases and
// tied embeddings, Qwen3 in bf16, Qwen2-MoE, Qwen3-MoE, Mixtral) split into FSDP2 rank files of several world
// sizes by tessera split first, so every export starts from a distributed checkpoint; and a SentencePiece
// tokenizer.model instead of tokenizer.json. Needs node and an installed node-llama-cpp: set TESSERA_NODE_LLAMA to the
// folder holding its node_modules (`npm install node-llama-cpp@3` there). Skips cleanly without them.

#include "testutil.h"

#include <QObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTest>

#include <filesystem>

namespace fs = std::filesystem;
using namespace tessera;

class TestGgufLlama : public QObject {
    Q_OBJECT

private:
    QString m_node;
    std::string m_checkDir; ///< a folder with gguf_check.mjs beside a node_modules link

private Q_SLOTS:
    void initTestCase()
    {
        const QByteArray modules = qgetenv("TESSERA_NODE_LLAMA");
        if (modules.isEmpty())
            QSKIP("TESSERA_NODE_LLAMA is not set (the folder where `npm install node-llama-cpp@3` was run)");
        const fs::path nodeModules = fs::path(modules.toStdString()) / "node_modules";
        if (!fs::exists(nodeModules / "node-llama-cpp"))
            QSKIP("node-llama-cpp is not installed under TESSERA_NODE_LLAMA");
        m_node = QStandardPaths::findExecutable(QStringLiteral("node"));
        if (m_node.isEmpty())
            QSKIP("node is not installed");
        const std::string script = test::fixturesDir() + "/../tools/gguf_check.mjs";
        if (!fs::exists(script))
            QSKIP("../shared/tools/gguf_check.mjs is not there");
        // Node resolves the script's imports from the script's own folder: put a copy beside node_modules.
        m_checkDir = test::makeTempDir();
        fs::copy_file(script, m_checkDir + "/gguf_check.mjs");
        fs::create_directory_symlink(fs::absolute(nodeModules), m_checkDir + "/node_modules");
    }

    void familiesFromFsdpSplits_data()
    {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("worldSize");
        QTest::addColumn<QString>("outtype");
        QTest::addColumn<QString>("tolerance");
        const std::pair<const char*, const char*> families[] = { { "qwen2_bias_tied", "2" }, { "qwen3_bf16", "3" },
                                                                 { "qwen2moe", "4" }, { "qwen3moe", "2" },
                                                                 { "mixtral", "3" } };
        for (const auto& [family, world] : families)
            for (const char* outtype : { "f32", "f16" })
                QTest::newRow(qPrintable(QStringLiteral("%1 w%2 %3").arg(QLatin1String(family), QLatin1String(world),
                                                                          QLatin1String(outtype))))
                    << QString::fromLatin1(family) << QString::fromLatin1(world) << QString::fromLatin1(outtype)
                    << QString::fromLatin1(outtype == std::string("f32") ? "1e-2" : "5e-2");
    }

    void familiesFromFsdpSplits()
    {
        QFETCH(QString, family);
        QFETCH(QString, worldSize);
        QFETCH(QString, outtype);
        QFETCH(QString, tolerance);
        const std::string hf = std::string(TESSERA_TEST_DATA_DIR) + "/gguf_families/" + family.toStdString();
        const std::string run = test::makeTempDir() + "/run";
        const std::string actor = run + "/global_step_1/actor";
        QString err;
        QVERIFY2(test::runTessera(test::A({ "split", "--hf_dir", hf, "--target_dir", actor, "--format", "fsdp",
                                            "--world_size", worldSize, "--quiet" }),
                                  nullptr, &err)
                     == 0,
                 qPrintable(err));
        const std::string target = run + "/gguf";
        QVERIFY2(test::runTessera(test::A({ "merge", "--local_dir", actor, "--target_dir", target, "--format", "gguf",
                                            "--outtype", outtype, "--name", family, "--quiet" }),
                                  nullptr, &err)
                     == 0,
                 qPrintable(err));
        check(QString::fromStdString(target + "/") + family + QStringLiteral("-") + outtype + QStringLiteral(".gguf"),
              QString::fromStdString(hf + "/expected_generation.json"), tolerance);
    }

    void sentencePieceTokenizerLoads()
    {
        // The fixture's weights with a SentencePiece tokenizer.model instead of its tokenizer.json: llama.cpp loads
        // the `llama` vocabulary (scores, byte pieces, special ids) and the continuation is the same.
        const std::string config = test::makeTempDir() + "/config";
        fs::create_directories(config);
        fs::copy_file(test::fixture("gguf_llama_w2_fp32/reference/config.json"), config + "/config.json");
        for (const char* f : { "tokenizer.model", "tokenizer_config.json" })
            fs::copy_file(std::string(TESSERA_TEST_DATA_DIR) + "/gguf_families/sentencepiece_tokenizer/" + f,
                          config + "/" + f);
        const std::string target = test::makeTempDir() + "/gguf";
        QString err;
        QVERIFY2(test::runTessera(test::A({ "merge", "--local_dir", test::fixture("gguf_llama_w2_fp32/global_step_10/actor"),
                                            "--hf_model_path", config, "--target_dir", target, "--format", "gguf",
                                            "--outtype", "f32", "--name", "spm", "--quiet" }),
                                  nullptr, &err)
                     == 0,
                 qPrintable(err));
        check(QString::fromStdString(target + "/spm-f32.gguf"),
              QString::fromStdString(test::fixture("gguf_llama_w2_fp32/expected_generation.json")), QStringLiteral("1e-2"));
    }

    void llamaCppReproducesTheReference_data()
    {
        QTest::addColumn<QString>("outtype");
        QTest::addColumn<QString>("tolerance");
        QTest::newRow("f32") << QStringLiteral("f32") << QStringLiteral("1e-2");
        QTest::newRow("f16") << QStringLiteral("f16") << QStringLiteral("5e-2");
    }

    void llamaCppReproducesTheReference()
    {
        QFETCH(QString, outtype);
        QFETCH(QString, tolerance);
        const std::string target = test::makeTempDir() + "/gguf";
        QString err;
        const int code = test::runTessera(test::A({ "merge", "--local_dir",
                                                    test::fixture("gguf_llama_w2_fp32/global_step_10/actor"),
                                                    "--target_dir", target, "--format", "gguf", "--outtype", outtype,
                                                    "--quiet" }),
                                          nullptr, &err);
        QVERIFY2(code == 0, qPrintable(err));
        const QString model = QString::fromStdString(target + "/gguf_llama_w2_fp32-") + outtype + QStringLiteral(".gguf");
        check(model, QString::fromStdString(test::fixture("gguf_llama_w2_fp32/expected_generation.json")), tolerance);
    }

private:
    /// Runs gguf_check.mjs on `model`: llama.cpp's greedy continuation must be the reference's, each chosen token's
    /// log-probability within `tolerance`.
    void check(const QString& model, const QString& expected, const QString& tolerance)
    {
        QVERIFY2(fs::exists(model.toStdString()), qPrintable(model));
        QProcess node;
        node.setProcessChannelMode(QProcess::MergedChannels);
        node.start(m_node, { QString::fromStdString(m_checkDir + "/gguf_check.mjs"), model, expected, tolerance });
        QVERIFY(node.waitForFinished(300000));
        const QString output = QString::fromUtf8(node.readAll());
        qInfo("%s", qPrintable(output.trimmed()));
        QVERIFY2(node.exitStatus() == QProcess::NormalExit && node.exitCode() == 0, qPrintable(output));
        QVERIFY2(output.contains(QStringLiteral("greedy matches")), qPrintable(output));
    }
};

QTEST_GUILESS_MAIN(TestGgufLlama)
#include "tst_gguf_llama.moc"
