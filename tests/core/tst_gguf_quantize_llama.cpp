// SPDX-License-Identifier: GPL-3.0-or-later
// Quantized GGUF exports against llama.cpp's own quantizer: for every quantized --outtype, Tessera's one-step export
// of a checkpoint must be the file `llama-quantize` makes from Tessera's lossless export of it (f32 for fp32
// weights, bf16 for bf16): the same ggml type for every tensor, the same bytes, the same general.file_type and
// general.quantization_version (../shared/tools/gguf_compare.py). The quantizer is llama_model_quantize from the
// libllama npm's node-llama-cpp@3.22.1 ships (../shared/tools/llama_quantize.py), the version whose mixtures Tessera
// follows; and real llama.cpp must continue the prompt with the same greedy tokens from either file.
// Needs node-llama-cpp@3.22.1 under TESSERA_NODE_LLAMA and python3; skips cleanly without them.

#include "testutil.h"

#include "../../bench/synthetic_checkpoint.h"

#include "formats/gguf_types.h"

#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>

namespace fs = std::filesystem;
using namespace tessera;

namespace {

constexpr const char* kPinnedVersion = "3.22.1";

/// One checkpoint the matrix exports: where it is, its lossless output type, the name of its files.
struct Source {
    std::string localDir;
    const char* lossless;
    const char* name;
};

/// A Llama of 16 layers (rows of 256 and 688), made once: enough layers for every layer rule of the mixtures (the
/// first sixteenth, eighth, the last eighth, every third between), which the fixtures' two layers cannot show.
std::string deepLlama()
{
    static const std::string dir = [] {
        const std::string actor = test::makeTempDir() + "/actor";
        constexpr double kGb = 0.058;
        if (!bench::writeCheckpoint(actor, kGb, 2, 256))
            return std::string();
        bench::writeLlamaConfig(actor + "/huggingface", kGb, 256);
        return actor;
    }();
    return dir;
}

bool isOneOf(const char* type, std::initializer_list<const char*> types)
{
    for (const char* t : types)
        if (std::string(t) == type)
            return true;
    return false;
}

/// Whether a sampled run (CI's sanitizer build, tests/testutil.h) compares `type` on `source`: every type on the
/// shared fixtures; on the deep model the types whose mixture depends on the layer; on the families one type of
/// each kind (a k-quant mixture, the lowest bits, a legacy type, Q8_0).
bool inSample(const std::string& source, const char* type)
{
    if (source == "llama256 bf16" || source == "llama fp32")
        return true;
    if (source == "llama 16 layers")
        return isOneOf(type, { "q4_k_m", "q5_k_m", "q4_k_s", "q3_k_m", "q2_k" });
    return isOneOf(type, { "q4_k_m", "q2_k", "q4_0", "q8_0" });
}

const std::map<std::string, Source>& sources()
{
    static const std::string families = std::string(TESSERA_TEST_DATA_DIR) + "/gguf_families/";
    static const std::map<std::string, Source> all = {
        // rows of 256 and 768: every k-quant applies
        { "llama256 bf16", { test::fixture("gguf_llama256_w2_bf16/global_step_10/actor"), "bf16", "llama256" } },
        // rows of 128: the fallback types (Q5_0, Q8_0, Q5_1, Q4_0)
        { "llama fp32", { test::fixture("gguf_llama_w2_fp32/global_step_10/actor"), "f32", "llama" } },
        // tied embeddings (token_embd takes the output rule), biases, rows of 32 and 48 (F16 fallbacks)
        { "qwen2 tied", { families + "qwen2_bias_tied", "f32", "qwen2tied" } },
        // experts (3-D tensors), the router kept as it is
        { "mixtral", { families + "mixtral", "f32", "mixtral" } },
        { "qwen2moe", { families + "qwen2moe", "f32", "qwen2moe" } },
        { "qwen3 bf16", { families + "qwen3_bf16", "bf16", "qwen3" } },
        { "llama 16 layers", { deepLlama(), "bf16", "deep" } },
    };
    return all;
}

} // namespace

class TestGgufQuantizeLlama : public QObject {
    Q_OBJECT

private:
    QString m_python;
    QString m_node;
    std::string m_libDir;
    std::string m_tools;
    std::string m_checkDir;               ///< gguf_check.mjs beside a node_modules link
    std::string m_work;
    std::map<std::string, std::string> m_lossless; ///< source → its lossless export, made once

private Q_SLOTS:
    void initTestCase()
    {
        const QByteArray modules = qgetenv("TESSERA_NODE_LLAMA");
        if (modules.isEmpty())
            QSKIP("TESSERA_NODE_LLAMA is not set (the folder where `npm install node-llama-cpp@3.22.1` was run)");
        const fs::path nodeModules = fs::path(modules.toStdString()) / "node_modules";
        std::ifstream package(nodeModules / "node-llama-cpp" / "package.json");
        if (!package)
            QSKIP("node-llama-cpp is not installed under TESSERA_NODE_LLAMA");
        const auto version = nlohmann::json::parse(package, nullptr, false).value("version", std::string());
        if (version != kPinnedVersion)
            QSKIP(qPrintable(QStringLiteral("node-llama-cpp %1 is installed; the mixtures follow %2's llama.cpp")
                                 .arg(QString::fromStdString(version), QLatin1String(kPinnedVersion))));
        m_libDir = (nodeModules / "@node-llama-cpp" / "linux-x64" / "bins" / "linux-x64").string();
        if (!fs::exists(m_libDir))
            QSKIP("node-llama-cpp's linux-x64 libraries are not installed");
        m_python = QStandardPaths::findExecutable(QStringLiteral("python3"));
        m_node = QStandardPaths::findExecutable(QStringLiteral("node"));
        if (m_python.isEmpty() || m_node.isEmpty())
            QSKIP("python3 or node is not installed");
        // The interpreter itself rather than a version manager's shim (pyenv's costs a third of a CPU-second at
        // each of the hundred starts below).
        QString interpreter;
        if (run(m_python, { QStringLiteral("-c"), QStringLiteral("import sys; print(sys.executable)") }, &interpreter) == 0
            && fs::exists(interpreter.trimmed().toStdString()))
            m_python = interpreter.trimmed();
        m_tools = test::fixturesDir() + "/../tools";
        for (const char* tool : { "llama_quantize.py", "gguf_compare.py", "gguf_check.mjs" })
            if (!fs::exists(m_tools + "/" + tool))
                QSKIP(qPrintable(QStringLiteral("../shared/tools/%1 is not there").arg(QLatin1String(tool))));
        m_checkDir = test::makeTempDir();
        fs::copy_file(m_tools + "/gguf_check.mjs", m_checkDir + "/gguf_check.mjs");
        fs::create_directory_symlink(fs::absolute(nodeModules), m_checkDir + "/node_modules");
        m_work = test::makeTempDir();
    }

    void sameFileAsLlamaQuantize_data()
    {
        QTest::addColumn<QString>("source");
        QTest::addColumn<QString>("outtype");
        for (const auto& [key, source] : sources())
            for (const auto& type : ggufOutTypes())
                if (type.tensorTypeInfo().quantized() && (!test::sampled() || inSample(key, type.name)))
                    QTest::newRow(qPrintable(QString::fromStdString(key) + QLatin1Char(' ') + QLatin1String(type.name)))
                        << QString::fromStdString(key) << QString::fromLatin1(type.name);
    }

    void sameFileAsLlamaQuantize()
    {
        QFETCH(QString, source);
        QFETCH(QString, outtype);
        const std::string ours = exported(source.toStdString(), outtype.toStdString());
        QVERIFY(!ours.empty());
        const std::string theirs = llamaQuantized(source.toStdString(), outtype.toStdString());
        QVERIFY(!theirs.empty());
        QString output;
        const int code = run(m_python, { QString::fromStdString(m_tools + "/gguf_compare.py"),
                                         QString::fromStdString(ours), QString::fromStdString(theirs) },
                             &output);
        QVERIFY2(code == 0, qPrintable(output));
        QVERIFY(fs::exists(fs::path(ours).parent_path() / "Modelfile"));
    }

    void llamaCppContinuesAlike_data()
    {
        QTest::addColumn<QString>("source");
        QTest::addColumn<QString>("outtype");
        QTest::newRow("llama256 q4_k_m") << QStringLiteral("llama256 bf16") << QStringLiteral("q4_k_m");
        QTest::newRow("llama q4_k_m") << QStringLiteral("llama fp32") << QStringLiteral("q4_k_m");
        QTest::newRow("llama256 q2_k") << QStringLiteral("llama256 bf16") << QStringLiteral("q2_k");
    }

    void llamaCppContinuesAlike()
    {
        QFETCH(QString, source);
        QFETCH(QString, outtype);
        const std::string ours = exported(source.toStdString(), outtype.toStdString());
        const std::string theirs = llamaQuantized(source.toStdString(), outtype.toStdString());
        QVERIFY(!ours.empty() && !theirs.empty());
        const std::string expected = fs::path(sources().at(source.toStdString()).localDir)
                                         .parent_path().parent_path().string() + "/expected_generation.json";
        const QString a = greedyTokens(ours, expected), b = greedyTokens(theirs, expected);
        QVERIFY2(!a.isEmpty(), "llama.cpp did not run Tessera's file");
        QCOMPARE(a, b);
    }

private:
    int run(const QString& program, const QStringList& args, QString* output)
    {
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(program, args);
        if (!p.waitForFinished(600000))
            return -1;
        if (output)
            *output = QString::fromUtf8(p.readAll());
        return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    }

    /// Tessera's export of `key` as `outtype` (into a folder of its own); "" after a failure it reports.
    std::string exported(const std::string& key, const std::string& outtype)
    {
        const Source& s = sources().at(key);
        const std::string target = m_work + "/" + s.name + "-" + outtype;
        const std::string file = target + "/" + s.name + "-" + outtype + ".gguf";
        if (fs::exists(file))
            return file;
        QString err;
        if (test::runTessera(test::A({ "merge", "--local_dir", s.localDir, "--target_dir", target, "--format", "gguf",
                                       "--outtype", outtype, "--name", s.name, "--quiet" }),
                             nullptr, &err)
            != 0) {
            qWarning("tessera merge --outtype %s of %s: %s", outtype.c_str(), key.c_str(), qPrintable(err));
            return {};
        }
        return file;
    }

    /// llama.cpp's quantization of Tessera's lossless export of `key`.
    std::string llamaQuantized(const std::string& key, const std::string& outtype)
    {
        const std::string lossless = exported(key, sources().at(key).lossless);
        if (lossless.empty())
            return {};
        const std::string out = m_work + "/llama-" + sources().at(key).name + "-" + outtype + ".gguf";
        if (fs::exists(out))
            return out;
        QString output;
        if (run(m_python, { QString::fromStdString(m_tools + "/llama_quantize.py"), QString::fromStdString(m_libDir),
                            QString::fromStdString(lossless), QString::fromStdString(out), QString::fromStdString(outtype) },
                &output)
            != 0) {
            qWarning("llama_quantize.py %s: %s", outtype.c_str(), qPrintable(output.right(2000)));
            return {};
        }
        return out;
    }

    /// The greedy continuation real llama.cpp gives from `model` ("" when it did not run): gguf_check.mjs prints it
    /// whether or not it matches the float reference, which a 2-bit model need not.
    QString greedyTokens(const std::string& model, const std::string& expected)
    {
        QString output;
        run(m_node, { QString::fromStdString(m_checkDir + "/gguf_check.mjs"), QString::fromStdString(model),
                      QString::fromStdString(expected), QStringLiteral("1e9") },
            &output);
        const auto match = QRegularExpression(QStringLiteral("greedy \\w+ \\(([0-9,]*) vs")).match(output);
        return match.hasMatch() ? match.captured(1) : QString();
    }
};

QTEST_GUILESS_MAIN(TestGgufQuantizeLlama)
#include "tst_gguf_quantize_llama.moc"
