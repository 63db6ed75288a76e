// SPDX-License-Identifier: GPL-3.0-or-later
// The command line facing hostile input end to end: names that are not UTF-8 or carry terminal escapes, regular
// expressions built to crash or hang a backtracking engine, a config.json claiming a billion layers. Exit 1 or 2
// with a message, never an abort.

#include "testutil.h"

#include "formats/gguf_file.h"
#include "formats/safetensors_writer.h"
#include "io/printable.h"
#include "pickle/torch_save_writer.h"

#include <nlohmann/json.hpp>

#include <QJsonDocument>
#include <QProcess>
#include <QTest>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

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

/// Tensor names that try every way a name can act on a terminal: escapes (CSI, OSC, the 8-bit CSI), a carriage
/// return over the line, line feeds that start a forged line (at the margin, or indented like an item of a listed
/// message), DEL, a tab and a right-to-left override. All valid UTF-8, so that every format can hold them.
const std::vector<std::string> kHostileNames = {
    "model.layers.0.\x1b[31mred\x1b[0m.weight",
    "model.layers.0.osc\x1b]0;owned\x07.weight",
    "model.layers.0.\rOK: carriage.weight",
    "model.layers.0.\nOK: forged.weight",
    "model.layers.0.\n  indented.weight",
    "model.layers.0.c1\xc2\x9b" "2J.weight",
    "model.layers.0.del\x7f.weight",
    "model.layers.0.tab\t.weight",
    "model.layers.0.rlo\xe2\x80\xae" "thgir.weight",
};
/// A name no UTF-8 reader accepts (torch.save can hold it: pickles store bytes).
const std::string kInvalidUtf8Name = "model.layers.0.bad\xff\xfe.weight";

void writeTorchSaveNamed(const std::string& path, const std::vector<std::string>& names)
{
    std::vector<TorchSaveTensor> tensors;
    for (const auto& name : names) {
        TorchSaveTensor t;
        t.name = name;
        t.dtype = DType::Float32;
        t.shape = { 2 };
        tensors.push_back(t);
    }
    auto status = writeTorchSave(path, tensors, [](std::size_t, std::uint64_t, std::uint8_t* dst, std::uint64_t bytes) {
        std::memset(dst, 0, bytes);
        return Status::success();
    });
    if (!status)
        qFatal("%s", status.error().message.c_str());
}

/// A Hugging Face folder of zero float32 tensors named `names`, with `configJson` as its config.json.
std::string writeSafetensorsFolder(const std::vector<std::string>& names, const std::string& configJson)
{
    const std::string dir = makeTempDir() + "/reference";
    fs::create_directories(dir);
    std::vector<SafetensorsEntry> entries;
    for (const auto& name : names)
        entries.push_back({ name, DType::Float32, { 2 } });
    auto layout = planSafetensorsFile(entries, { { "format", "pt" } });
    if (!layout)
        qFatal("%s", layout.error().message.c_str());
    std::string bytes = layout->header;
    bytes.resize(layout->fileSize, '\0');
    writeFile(dir + "/model.safetensors", bytes);
    writeFile(dir + "/config.json", configJson);
    return dir;
}

/// A GGUF file whose metadata strings, keys and tensor names hold escapes and line feeds.
std::string writeHostileGguf()
{
    const std::string forged = "evil\x1b[2J\x1b]0;owned\x07\nOK: forged\r\xc2\x9b";
    std::vector<GgufKeyValue> metadata = {
        { "general.architecture", GgufValue::string("llama") },
        { "general.name", GgufValue::string(forged) },
        { "general.description\x1b[31m\nOK: forged", GgufValue::string(forged) },
        { "tokenizer.ggml.model", GgufValue::string(forged) },
        { "tokenizer.ggml.tokens", GgufValue::strings({ forged, "a\nOK: forged" }) },
    };
    std::vector<GgufTensorInfo> tensors;
    for (const auto& name : { std::string("token_embd.weight"), std::string("blk.0.\x1b[31m\nOK: forged"),
                              std::string("x\rOK: carriage\x7f") })
        tensors.push_back({ name, { 32, 2 }, static_cast<std::uint32_t>(GgmlType::F32), 0, 0 });
    auto layout = layoutGgufFile(metadata, tensors);
    if (!layout)
        qFatal("%s", layout.error().message.c_str());
    std::string bytes = layout->header;
    bytes.resize(layout->fileSize, '\0');
    const std::string path = makeTempDir() + "/hostile.gguf";
    writeFile(path, bytes);
    return path;
}

/// A split merge into a target with both parts' records there (so --status reports every part done) whose host
/// and pid fields hold escapes and a pid past any integer type; returns the set's folder.
std::string partsSetWithHostileRecords(const std::string& checkpoint, const std::string& config);

struct RawRun {
    int code = -1;
    QByteArray out, err;
};

/// Runs tessera and keeps its output as bytes: a decoding QString would hide the very bytes under test.
RawRun runRaw(const QStringList& args)
{
    QProcess process;
    process.start(QString::fromStdString(tesseraBinary()), args);
    RawRun run;
    if (!process.waitForFinished(600000))
        return run;
    run.out = process.readAllStandardOutput();
    run.err = process.readAllStandardError();
    run.code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
    return run;
}

std::string partsSetWithHostileRecords(const std::string& checkpoint, const std::string& config)
{
    const std::string target = makeTempDir() + "/target";
    fs::create_directories(target);
    const RawRun part = runRaw(A({ "merge", "--local_dir", checkpoint, "--target_dir", target, "--hf_model_path", config,
                                   "--part", "0/2", "--quiet" }));
    if (part.code != 0)
        qFatal("part 0/2 failed: %s", part.err.constData());
    std::string set;
    for (const auto& e : fs::directory_iterator(target))
        if (e.path().filename().string().find("tessera-parts-") != std::string::npos)
            set = e.path().string();
    auto record = nlohmann::json::parse(readFile(set + "/part-0-of-2.json"));
    record["host"] = "evil\x1b]0;owned\x07\nOK: forged\r";
    record["pid"] = 0;
    // 2^70: no integer type holds it (JSON parsers read it as a float).
    std::string text = record.dump();
    text.replace(text.find("\"pid\":0"), 7, "\"pid\":1180591620717411303424");
    writeFile(set + "/part-0-of-2.json", text);
    record["part"] = 1;
    record["pid"] = -5;
    writeFile(set + "/part-1-of-2.json", record.dump());
    writeFile(set + "/finishing", "evil\x1b]0;owned\x07\rOK: carriage 99999999999999999999\n");
    return set;
}

/// Empty when `bytes` is safe on a terminal: every line printable (no control character, DEL, C1 control or
/// byte that is not UTF-8) and no line that a name started (a forged verdict, an item of a message).
std::string terminalProblem(const QByteArray& bytes)
{
    const std::string text = bytes.toStdString();
    std::size_t start = 0;
    for (int line = 1; start <= text.size(); ++line) {
        const std::size_t end = std::min(text.find('\n', start), text.size());
        const std::string shown = text.substr(start, end - start);
        if (!isPrintableText(shown))
            return "line " + std::to_string(line) + " holds raw bytes: " + printableText(shown);
        const std::string trimmed = shown.substr(std::min(shown.find_first_not_of(' '), shown.size()));
        for (const char* forged : { "OK: forged", "OK: carriage", "indented" })
            if (trimmed.rfind(forged, 0) == 0)
                return "line " + std::to_string(line) + " was started by a name: " + shown;
        start = end + 1;
    }
    return {};
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

    /// Every command's text and JSON output on checkpoints whose tensor names, GGUF metadata, config values and
    /// parts records try to drive the terminal: no raw control byte or invalid UTF-8 reaches stdout or stderr, and no
    /// name starts a line of its own.
    void everyCommandPrintsHostileNamesEscaped()
    {
        const std::string dir = makeTempDir();
        std::vector<std::string> names = kHostileNames;
        names.push_back("model.embed_tokens.weight");
        const std::string checkpoint = dir + "/model.pt";
        writeTorchSaveNamed(checkpoint, names);
        std::vector<std::string> withInvalid = names;
        withInvalid.push_back(kInvalidUtf8Name);
        const std::string invalid = makeTempDir() + "/invalid.pt";
        writeTorchSaveNamed(invalid, withInvalid);
        const std::string config = makeTempDir();
        // JSON escapes, so the config holds the control characters themselves.
        writeFile(config + "/config.json",
                  "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 2, "
                  "\"num_hidden_layers\": 1, \"num_attention_heads\": 1, \"num_key_value_heads\": 1, "
                  "\"intermediate_size\": 4, \"max_position_embeddings\": 8, \"rms_norm_eps\": 1e-5, "
                  "\"vocab_size\": 2, \"_name_or_path\": \"org/evil\\u001b[2J\\nOK: forged\\r\\u009b\"}");
        // The reference lacks two of the names and has one of its own, so every list shows names.
        std::vector<std::string> referenceNames(names.begin() + 2, names.end());
        referenceNames.push_back("only.in.b\x1b[31m\nOK: forged");
        const std::string reference = writeSafetensorsFolder(
            referenceNames, "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\\u001b[31m\\nOK: forged\", "
                            "\"hidden_size\": 2}");
        const std::string gguf = writeHostileGguf();
        writeFile(fs::path(gguf).parent_path().string() + "/config.json", readFile(config + "/config.json"));
        // A model whose config names it with escapes: the GGUF export's file is named after it.
        const std::string actor = fixture("gguf_llama_w2_fp32/global_step_10/actor");
        const std::string named = makeTempDir() + "/huggingface";
        fs::copy(actor + "/huggingface", named);
        std::string namedConfig = readFile(named + "/config.json");
        namedConfig.insert(namedConfig.find('{') + 1, "\"_name_or_path\": \"org/evil\\u001b[2J\\nOK: forged\\r\\u009b\", ");
        writeFile(named + "/config.json", namedConfig);
        const std::string status = partsSetWithHostileRecords(checkpoint, config);
        const int claim = ::open((status + "/finishing").c_str(), O_RDONLY);
        QVERIFY(claim >= 0 && ::flock(claim, LOCK_EX) == 0); // a live publisher, so --status names it

        const std::string out = makeTempDir();
        const std::vector<QStringList> commands = {
            A({ "inspect", checkpoint, "--tensors" }),
            A({ "inspect", invalid, "--tensors" }),
            A({ "inspect", gguf, "--tensors" }),
            A({ "merge", "--local_dir", checkpoint, "--target_dir", out + "/m", "--hf_model_path", config, "--dry-run",
                "--tensors" }),
            A({ "merge", "--local_dir", checkpoint, "--target_dir", out + "/m", "--hf_model_path", config }),
            A({ "merge", "--local_dir", invalid, "--target_dir", out + "/i", "--hf_model_path", config }),
            A({ "merge", "--local_dir", checkpoint, "--target_dir", out + "/g", "--hf_model_path", config, "--format",
                "gguf" }),
            A({ "merge", "--local_dir", gguf, "--target_dir", out + "/g", "--format", "gguf", "--dry-run", "--tensors" }),
            A({ "merge", "--local_dir", actor, "--target_dir", out + "/n", "--hf_model_path", named, "--format", "gguf",
                "--dry-run", "--tensors" }),
            A({ "merge", "--local_dir", actor, "--target_dir", out + "/n", "--hf_model_path", named, "--format", "gguf",
                "--part", "0/2", "--dry-run" }),
            A({ "merge", "--local_dir", actor, "--target_dir", out + "/n", "--hf_model_path", named, "--format", "gguf" }),
            A({ "merge", "--status", fs::path(status).parent_path().string() }),
            A({ "test", "--local_dir", checkpoint, "--test_hf_dir", reference, "--hf_model_path", config }),
            A({ "test", "--local_dir", invalid, "--test_hf_dir", reference, "--hf_model_path", config }),
            A({ "diff", checkpoint, reference, "--hf_model_path", config }),
            A({ "diff", invalid, reference }),
            A({ "split", "--local_dir", checkpoint, "--target_dir", out + "/s", "--format", "fsdp", "--world_size", "2",
                "--hf_model_path", config, "--dry-run", "--tensors" }),
            A({ "split", "--local_dir", checkpoint, "--target_dir", out + "/s", "--format", "fsdp", "--world_size", "2",
                "--hf_model_path", config }),
            A({ "split", "--local_dir", checkpoint, "--target_dir", out + "/d", "--format", "dcp", "--world_size", "2",
                "--hf_model_path", config, "--dry-run", "--tensors" }),
            A({ "split", "--local_dir", checkpoint, "--target_dir", out + "/t", "--format", "megatron",
                "--hf_model_path", config }),
            A({ "split", "--local_dir", checkpoint, "--target_dir", out + "/p", "--format", "fsdp", "--world_size", "2",
                "--hf_model_path", config, "--part", "0/2", "--dry-run" }),
            A({ "split", "--status", fs::path(status).parent_path().string() }),
        };
        for (const auto& args : commands)
            for (const bool json : { false, true }) {
                const QStringList run = json ? args + QStringList { QStringLiteral("--json") } : args;
                const RawRun r = runRaw(run);
                const QByteArray what = run.join(QLatin1Char(' ')).toUtf8().toPercentEncoding(" /-_.=");
                QVERIFY2(r.code == 0 || r.code == 1, QByteArray(what + "\n" + r.err).constData());
                for (const auto* stream : { &r.out, &r.err }) {
                    const std::string problem = terminalProblem(*stream);
                    QVERIFY2(problem.empty(), QByteArray(what + ": " + QByteArray::fromStdString(problem)).constData());
                }
                if (json)
                    QVERIFY2(nlohmann::json::accept(r.out.toStdString()), QByteArray(what + "\n" + r.out).constData());
            }
        ::close(claim);
    }

    /// The names are there, escaped: what the gate above lets through is still the name, not a blank.
    void hostileNamesAreShownEscaped()
    {
        const std::string checkpoint = makeTempDir() + "/model.pt";
        writeTorchSaveNamed(checkpoint, kHostileNames);
        const RawRun inspect = runRaw(A({ "inspect", checkpoint, "--tensors" }));
        for (const char* shown : { "model.layers.0.\\x1B[31mred\\x1B[0m.weight",
                                   "model.layers.0.\\x0DOK: carriage.weight",
                                   "model.layers.0.\\x0AOK: forged.weight", "model.layers.0.\\x0A  indented.weight",
                                   "model.layers.0.c1\\xC2\\x9B2J.weight", "model.layers.0.del\\x7F.weight",
                                   "model.layers.0.tab\\x09.weight",
                                   "model.layers.0.rlo\\xE2\\x80\\xAEthgir.weight" })
            QVERIFY2(inspect.out.contains(shown), QByteArray(QByteArray(shown) + "\n" + inspect.out).constData());
        const RawRun dryRun = runRaw(A({ "merge", "--local_dir", checkpoint, "--target_dir", makeTempDir() + "/m",
                                         "--dry-run", "--tensors" }));
        QVERIFY2(dryRun.out.contains("model.layers.0.\\x0AOK: forged.weight  float32"), dryRun.out.constData());
        const RawRun diff = runRaw(A({ "diff", checkpoint, checkpoint }));
        QVERIFY2(diff.out.contains("  model.layers.0.\\x0AOK: forged.weight\n"), diff.out.constData());
        // JSON keeps the names whole: a parser gets the very bytes back, with DEL and C1 controls escaped as \u.
        const RawRun json = runRaw(A({ "inspect", checkpoint, "--json" }));
        QVERIFY2(json.out.contains("del\\u007f.weight") && json.out.contains("c1\\u009b2J")
                     && json.out.contains("rlo\\u202ethgir"),
                 json.out.constData());
        const auto document = nlohmann::json::parse(json.out.toStdString());
        std::vector<std::string> parsed;
        for (const auto& t : document["tensors"])
            parsed.push_back(t["name"].get<std::string>());
        QCOMPARE(parsed, kHostileNames);
    }

    /// A tensor name a safetensors header cannot hold (not UTF-8, or its reserved key) is refused by merge and split
    /// naming the file it was read from (not the output file) and showing its bytes escaped.
    void badTensorNameErrorNamesItsSourceFile()
    {
        for (const auto& [name, message] :
             { std::pair { kInvalidUtf8Name, std::string("tensor name 'model.layers.0.bad\\xFF\\xFE.weight' is not "
                                                          "valid UTF-8") },
               std::pair { std::string("__metadata__"), std::string("a tensor cannot be named __metadata__") } }) {
            const std::string checkpoint = makeTempDir() + "/model.pt";
            writeTorchSaveNamed(checkpoint, { "model.embed_tokens.weight", name });
            for (const char* command : { "merge", "split" }) {
                QStringList args = A({ command, "--local_dir", checkpoint, "--target_dir", makeTempDir() + "/out" });
                if (std::string(command) == "split")
                    args += A({ "--world_size", "2" });
                const RawRun r = runRaw(args);
                QCOMPARE(r.code, 1);
                QVERIFY2(r.err.contains(QByteArray::fromStdString(checkpoint + ": " + message)), r.err.constData());
                QVERIFY2(!r.err.contains("model.safetensors"), r.err.constData());
            }
        }
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
