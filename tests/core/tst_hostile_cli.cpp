// SPDX-License-Identifier: GPL-3.0-or-later
// The command line facing hostile input end to end: names that are not UTF-8 or carry terminal escapes, regular
// expressions built to crash or hang a backtracking engine, a config.json claiming a billion layers. Exit 1 or 2
// with a message, never an abort.

#include "testutil.h"

#include "pickle/torch_save_writer.h"

#include <QJsonDocument>
#include <QTest>

#include <cstring>
#include <filesystem>

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

/// A one-tensor torch.save file whose tensor name is `name` (any bytes).
std::string torchSaveWithName(const std::string& name)
{
    const std::string path = makeTempDir() + "/model.pt";
    TorchSaveTensor t;
    t.name = name;
    t.dtype = DType::Float32;
    t.shape = { 2 };
    auto status = writeTorchSave(path, { t }, [](std::size_t, std::uint64_t, std::uint8_t* dst, std::uint64_t bytes) {
        std::memset(dst, 0, bytes);
        return Status::success();
    });
    if (!status)
        qFatal("%s", status.error().message.c_str());
    return path;
}

} // namespace

class TestHostileCli : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void nonUtf8TensorNameInJson()
    {
        const std::string path = torchSaveWithName("model.w\xff\xfe");
        QString out, err;
        const int code = runTessera({ QStringLiteral("inspect"), q(path), QStringLiteral("--json") }, &out, &err);
        QVERIFY2(code == 0 || code == 1, qPrintable(err));
        QJsonParseError parseError;
        QJsonDocument::fromJson(out.toUtf8(), &parseError);
        QVERIFY2(parseError.error == QJsonParseError::NoError, qPrintable(out));
    }

    void terminalEscapesInNamesArePrintedEscaped()
    {
        const std::string path = torchSaveWithName("model.\x1b[2J\x1b]0;owned\x07w");
        QString out, err;
        const int code = runTessera({ QStringLiteral("inspect"), q(path), QStringLiteral("--tensors") }, &out, &err);
        QVERIFY2(code == 0 || code == 1, qPrintable(err));
        QVERIFY(!out.contains(QChar(0x1b)) && !out.contains(QChar(0x07)));
        QVERIFY2(out.contains(QStringLiteral("model.\\x1B[2J")), qPrintable(out));
    }

    void invalidIgnoreRegexIsAUsageErrorOnEveryBackend()
    {
        const std::string actor = fixture("fsdp2_llama_w4/global_step_10/actor");
        QString err;
        const int code = runTessera({ QStringLiteral("merge"), QStringLiteral("--backend"), QStringLiteral("fsdp"),
                                      QStringLiteral("--local_dir"), q(actor), QStringLiteral("--target_dir"),
                                      q(makeTempDir() + "/out"), QStringLiteral("--ignore_missing_params"),
                                      QStringLiteral("model.(") },
                                    nullptr, &err);
        QCOMPARE(code, 2);
        QVERIFY2(err.contains(QStringLiteral("--ignore_missing_params 'model.(' is not a valid regular expression")),
                 qPrintable(err));
    }

    void deeplyNestedRegexCannotCrash()
    {
        const std::string nested = std::string(50000, '(') + "a" + std::string(50000, ')');
        const std::string dir = fixture("megatron_legacy_qwen2_tp2_pp2/global_step_10/actor");
        QString err;
        const int code = runTessera({ QStringLiteral("inspect"), q(dir), QStringLiteral("--ignore_missing_params"),
                                      q(nested) },
                                    nullptr, &err);
        QCOMPARE(code, 2);
        QVERIFY2(err.contains(QStringLiteral("is 100001 characters long; at most 4096 are accepted")), qPrintable(err));
        // Under the length bound, nesting is no danger to RE2 (it neither recurses nor backtracks): 2,000 levels
        // are compiled and matched.
        const std::string deep = std::string(2000, '(') + "a" + std::string(2000, ')');
        QCOMPARE(runTessera({ QStringLiteral("inspect"), q(dir), QStringLiteral("--ignore_missing_params"), q(deep) },
                            nullptr, &err),
                 0);
    }

    void lookaroundAndBackreferencesAreRefusedByName()
    {
        // RE2 has neither; the message names the construct instead of RE2's "invalid perl operator".
        const std::string dir = fixture("megatron_legacy_qwen2_tp2_pp2/global_step_10/actor");
        const std::pair<const char*, const char*> refused[] = {
            { "^(?!model)", "'^(?!model)' uses a negative lookahead (?!…), which RE2 (Tessera's linear-time regex "
                            "engine) does not have: match the names themselves instead" },
            { "(norm)\\.\\1", "'(norm)\\.\\1' uses a backreference (\\1), which RE2 (Tessera's linear-time regex "
                                  "engine) does not have: repeat the group's pattern instead" },
        };
        for (const auto& [pattern, message] : refused) {
            QString err;
            QCOMPARE(runTessera({ QStringLiteral("inspect"), q(dir), QStringLiteral("--ignore_missing_params"),
                                  QString::fromUtf8(pattern) },
                                nullptr, &err),
                     2);
            QVERIFY2(err.contains(QString::fromUtf8(message)), qPrintable(err));
        }
    }

    void greedyRuleTemplatesDoNotHangASplit()
    {
        // Reading the rules backwards, split matched each Hugging Face name against the template's groups, one
        // ([A-Za-z][A-Za-z0-9_.]*) per {param}, and std::regex tried every way of splitting the name among them.
        // The rule takes the place of the first built-in one, so every name meets it, and it matches none.
        std::string greedy;
        for (int i = 0; i < 12; ++i)
            greedy += "{param}";
        const std::string rules = makeTempDir() + "/rules.json";
        writeFile(rules, R"({"rules": [{"id": "embedding", "megatron": "embedding.word_embeddings.weight", "hf": ")"
                             + greedy + R"(Q"}]})");
        QString out, err;
        const int code = runTessera({ QStringLiteral("split"), QStringLiteral("--hf_dir"),
                                      q(fixture("megatron_legacy_qwen2_tp2_pp2/reference")), QStringLiteral("--target_dir"),
                                      q(makeTempDir() + "/out"), QStringLiteral("--format"), QStringLiteral("megatron"),
                                      QStringLiteral("--tp"), QStringLiteral("2"), QStringLiteral("--param_mapping"),
                                      q(rules), QStringLiteral("--dry-run") },
                                    &out, &err);
        QCOMPARE(code, 1);
        QVERIFY2(err.contains(QStringLiteral("no rule of the qwen2 family gives these tensors a Megatron name (add one "
                                             "with --param_mapping):\n  model.embed_tokens.weight\n")),
                 qPrintable(out + err));
    }

    void paramMappingThatIsADeviceOrMistypedIsAnError()
    {
        const std::string dir = fixture("megatron_legacy_qwen2_tp2_pp2/global_step_10/actor");
        QString out, err;
        QCOMPARE(runTessera({ QStringLiteral("inspect"), q(dir), QStringLiteral("--param_mapping"),
                              QStringLiteral("/dev/zero") },
                            &out, &err),
                 1);
        QVERIFY2(out.contains(QStringLiteral("/dev/zero: is a character device")), qPrintable(out + err));

        const std::string rules = makeTempDir() + "/rules.json";
        writeFile(rules, R"({"rules": [{"id": "x", "remove": "yes"}]})");
        QCOMPARE(runTessera({ QStringLiteral("inspect"), q(dir), QStringLiteral("--param_mapping"), q(rules) }, &out,
                            &err),
                 1);
        QVERIFY2(out.contains(QStringLiteral("\"remove\" must be true or false")), qPrintable(out + err));
    }

    void billionLayersInConfigIsRefusedByTheMapping()
    {
        const std::string dir = fixture("megatron_legacy_qwen2_tp2_pp2/global_step_10/actor");
        const std::string hf = makeTempDir();
        std::string config = readFile(dir + "/hf_config_and_tokenizer/config.json");
        const auto at = config.find("\"num_hidden_layers\"");
        QVERIFY(at != std::string::npos);
        const auto end = config.find_first_of(",}", at);
        config.replace(at, end - at, "\"num_hidden_layers\": 1000000000");
        writeFile(hf + "/config.json", config);
        QString out, err;
        const int code = runTessera({ QStringLiteral("inspect"), q(dir), QStringLiteral("--hf_model_path"), q(hf) },
                                    &out, &err);
        QCOMPARE(code, 1);
        QVERIFY2(out.contains(QStringLiteral("1000000000 layers")), qPrintable(out));
    }
};

QTEST_GUILESS_MAIN(TestHostileCli)
#include "tst_hostile_cli.moc"
