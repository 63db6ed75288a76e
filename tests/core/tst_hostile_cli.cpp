// SPDX-License-Identifier: GPL-3.0-or-later
// The command line facing hostile input end to end: names that are not UTF-8 or carry terminal escapes, regular
// expressions built to crash std::regex, a config.json claiming a billion layers. Exit 1 or 2 with a message,
// never an abort.

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
        QVERIFY2(err.contains(QStringLiteral("characters long")), qPrintable(err));
        const std::string deep = std::string(40, '(') + "a" + std::string(40, ')');
        QCOMPARE(runTessera({ QStringLiteral("inspect"), q(dir), QStringLiteral("--ignore_missing_params"), q(deep) },
                            nullptr, &err),
                 2);
        QVERIFY2(err.contains(QStringLiteral("nests groups 40 levels deep")), qPrintable(err));
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
