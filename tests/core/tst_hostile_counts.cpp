// SPDX-License-Identifier: GPL-3.0-or-later
// Counts a file claims against the bytes it holds: a GGUF whose stacked experts or head count are numbers with no
// data behind them, tokenizer files whose pieces or ids would fill gigabytes, a config.json whose head_dim would
// size a generated rope_freqs tensor of gigabytes. Each run is bounded in time and memory and must end with a
// message naming the file, having allocated nothing the data does not back and written nothing.

#include "testutil.h"
#include "bounded_run.h"

#include "formats/gguf_file.h"
#include "formats/gguf_reader.h"

#include <nlohmann/json.hpp>

#include <QTest>

#include <filesystem>
#include <functional>

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

constexpr int kTimeoutMs = 60000;
/// A GGUF export of the fixture maps well under 700 MB; the finding's tokenizer.json took 1.2 GB.
constexpr rlim_t kTightAddressSpace = 1'000'000'000ULL;

/// A GGUF file of `metadata` and `tensors` (dims innermost first), their data zeros: a few hundred bytes when
/// the tensors claim no data.
std::string writeGguf(const std::vector<GgufKeyValue>& metadata, std::vector<GgufTensorInfo> tensors)
{
    auto layout = layoutGgufFile(metadata, tensors);
    if (!layout)
        qFatal("%s", layout.error().message.c_str());
    std::string bytes = layout->header;
    bytes.resize(layout->fileSize, '\0');
    const std::string path = makeTempDir() + "/hostile.gguf";
    writeFile(path, bytes);
    return path;
}

GgufTensorInfo tensor(const std::string& name, std::vector<std::uint64_t> dims)
{
    GgufTensorInfo t;
    t.name = name;
    t.dims = std::move(dims);
    t.type = static_cast<std::uint32_t>(GgmlType::F16);
    return t;
}

/// A writable copy of the llama fixture's actor folder, its config and tokenizer in huggingface/.
std::string llamaCopy() { return copyFixtureFolder("gguf_llama_w2_fp32/global_step_10/actor"); }

void editConfig(const std::string& actor, const std::function<void(json&)>& edit)
{
    const std::string path = actor + "/huggingface/config.json";
    json config = json::parse(readFile(path));
    edit(config);
    writeFile(path, config.dump(2));
}

/// `tessera merge --format gguf` of `actor` under the memory limit: exit 1, a message naming `named`, no target.
void exportIsRefused(const std::string& actor, const std::string& named, rlim_t addressSpace = kChildAddressSpace)
{
    const std::string target = makeTempDir() + "/out";
    const BoundedRun run = runTesseraBounded({ "merge", "--local_dir", actor, "--target_dir", target, "--format", "gguf" },
                                             kTimeoutMs, addressSpace);
    QVERIFY2(run.exitCode == 1, qPrintable(run.outcome() + QStringLiteral(": ") + run.err));
    QVERIFY2(run.err.contains(q(named)), qPrintable(run.err));
    QVERIFY2(!fs::exists(target), target.c_str());
}

} // namespace

class TestHostileCounts : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void stackedExpertsWithoutDataAreRefused_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<qint64>("declared");
        QTest::addRow("gate, no expert_count") << QStringLiteral("blk.0.ffn_gate_exps.weight") << qint64(0);
        QTest::addRow("up, expert_count agrees") << QStringLiteral("blk.0.ffn_up_exps.weight") << qint64(1 << 24);
        QTest::addRow("down, expert_count 8") << QStringLiteral("blk.3.ffn_down_exps.weight") << qint64(8);
    }

    void stackedExpertsWithoutDataAreRefused()
    {
        // 2^24 experts of [0, 64]: a 200-byte file that once grew past 3 GB splitting them.
        QFETCH(QString, name);
        QFETCH(qint64, declared);
        std::vector<GgufKeyValue> metadata = { { "general.architecture", GgufValue::string("qwen2moe") } };
        if (declared)
            metadata.push_back({ "qwen2moe.expert_count", GgufValue::u32(static_cast<std::uint32_t>(declared)) });
        const std::string path = writeGguf(metadata, { tensor(name.toStdString(), { 64, 0, 1u << 24 }) });
        QVERIFY(fs::file_size(path) < 1024);
        const BoundedRun run = runTesseraBounded({ "inspect", path }, kTimeoutMs);
        QVERIFY2(run.exitCode == 1, qPrintable(run.outcome() + QStringLiteral(": ") + run.err));
        QVERIFY2(run.err.contains(q(path)) && run.err.contains(name), qPrintable(run.err));
    }

    void expertCountsAreCheckedAgainstTheFile()
    {
        // Three experts with data: split, one tensor each, when the file says three; refused when it says 1000.
        auto scan = [](std::uint32_t declared) {
            return scanGgufFile(writeGguf({ { "general.architecture", GgufValue::string("qwen2moe") },
                                            { "qwen2moe.expert_count", GgufValue::u32(declared) } },
                                          { tensor("blk.0.ffn_gate_exps.weight", { 32, 2, 3 }) }));
        };
        auto three = scan(3);
        QVERIFY_RESULT(three);
        QCOMPARE(three->tensors.size(), std::size_t(3));
        QCOMPARE(three->tensors[2].name, std::string("model.layers.0.mlp.experts.2.gate_proj.weight"));
        auto lie = scan(1000);
        QVERIFY(!lie);
        QVERIFY2(lie.error().message.find("expert_count is 1000") != std::string::npos, lie.error().message.c_str());
    }

    void headCountsWithoutRowsMakeNoBoxes_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("key");
        QTest::addRow("q") << QStringLiteral("blk.0.attn_q.weight") << QStringLiteral("llama.attention.head_count");
        QTest::addRow("k") << QStringLiteral("blk.0.attn_k.weight") << QStringLiteral("llama.attention.head_count_kv");
    }

    void headCountsWithoutRowsMakeNoBoxes()
    {
        // head_count 2^39 over a tensor of 2^40 rows and no columns: two boxes per head were once made of nothing.
        QFETCH(QString, name);
        QFETCH(QString, key);
        const std::string path = writeGguf({ { "general.architecture", GgufValue::string("llama") },
                                             { key.toStdString(), GgufValue::u64(1ull << 39) } },
                                           { tensor(name.toStdString(), { 0, 1ull << 40 }) });
        const BoundedRun run = runTesseraBounded({ "inspect", path }, kTimeoutMs);
        QVERIFY2(run.exitCode == 0 || run.exitCode == 1, qPrintable(run.outcome() + QStringLiteral(": ") + run.err));
        auto info = scanGgufFile(path);
        QVERIFY_RESULT(info);
        QCOMPARE(info->tensors.size(), std::size_t(1));
        QCOMPARE(info->tensors.front().pieces.size(), std::size_t(1));
    }

    void tokenizerIdsPastTheEmbeddingAreRefused_data()
    {
        QTest::addColumn<bool>("added");
        QTest::addRow("vocab") << false;
        QTest::addRow("added_tokens") << true;
    }

    void tokenizerIdsPastTheEmbeddingAreRefused()
    {
        // One id of 2^24 in a 30 KB tokenizer.json once filled 16 million padding tokens (1.2 GB) before the
        // vocabulary was found larger than the 512-row embedding.
        QFETCH(bool, added);
        const std::string actor = llamaCopy();
        const std::string path = actor + "/huggingface/tokenizer.json";
        json tok = json::parse(readFile(path));
        if (added)
            tok["added_tokens"].push_back({ { "id", 1 << 24 }, { "content", "<|far|>" }, { "special", true } });
        else
            tok["model"]["vocab"]["far"] = 1 << 24;
        writeFile(path, tok.dump());
        exportIsRefused(actor, "tokenizer.json", kTightAddressSpace);
    }

    void sentencePiecePiecesAreBoundedByTheEmbedding_data()
    {
        QTest::addColumn<bool>("empty");
        QTest::addRow("24 MB of empty pieces") << true;
        QTest::addRow("600 pieces for 512 rows") << false;
    }

    void sentencePiecePiecesAreBoundedByTheEmbedding()
    {
        // A tokenizer.model of 12 million empty pieces (2 bytes each) once took gigabytes as a vocabulary.
        QFETCH(bool, empty);
        const std::string actor = llamaCopy();
        fs::remove(actor + "/huggingface/tokenizer.json");
        std::string model;
        if (empty) {
            for (int i = 0; i < 12'000'000; ++i)
                model += std::string("\x0a\x00", 2);
        } else {
            for (int i = 0; i < 600; ++i) {
                const std::string text = "p" + std::to_string(i);
                model += std::string("\x0a") + static_cast<char>(text.size() + 2) + "\x0a" + static_cast<char>(text.size()) + text;
            }
        }
        writeFile(actor + "/huggingface/tokenizer.model", model);
        exportIsRefused(actor, "tokenizer.model", kTightAddressSpace);
    }

    void headDimSizesNoGeneratedTensor_data()
    {
        QTest::addColumn<qint64>("headDim");
        QTest::addRow("4e9: an 8 GB rope_freqs") << qint64(4'000'000'000);
        QTest::addRow("4e8: an 800 MB rope_freqs") << qint64(400'000'000);
    }

    void headDimSizesNoGeneratedTensor()
    {
        // Llama 3's rope_freqs has head_dim / 2 values: head_dim must be what q_proj's rows say, before it sizes
        // anything.
        QFETCH(qint64, headDim);
        const std::string actor = llamaCopy();
        editConfig(actor, [&](json& c) {
            c["head_dim"] = headDim;
            c["rope_scaling"] = { { "rope_type", "llama3" }, { "factor", 8.0 }, { "low_freq_factor", 1.0 },
                                  { "high_freq_factor", 4.0 }, { "original_max_position_embeddings", 64 } };
        });
        exportIsRefused(actor, "head_dim");
        // The honest config with the same rope scaling exports, with rope_freqs of head_dim / 2 = 16 values.
        editConfig(actor, [](json& c) { c["head_dim"] = 32; });
        const std::string target = makeTempDir() + "/out";
        QString err;
        QCOMPARE(runTessera(A({ "merge", "--local_dir", actor, "--target_dir", target, "--format", "gguf", "--quiet" }),
                            nullptr, &err),
                 0);
        std::string gguf;
        for (const auto& e : fs::directory_iterator(target))
            if (e.path().extension() == ".gguf")
                gguf = e.path().string();
        auto info = scanGgufFile(gguf);
        QVERIFY_RESULT(info);
        bool found = false;
        for (const auto& t : info->tensors)
            if (t.name == "rope_freqs.weight") {
                found = true;
                QCOMPARE(t.shape, (Shape { 16 }));
            }
        QVERIFY(found);
    }
};

QTEST_GUILESS_MAIN(TestHostileCounts)
#include "tst_hostile_counts.moc"
