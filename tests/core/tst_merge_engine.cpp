// SPDX-License-Identifier: GPL-3.0-or-later
// The merge engine on synthetic checkpoints written with the project's own torch.save writer: uneven and empty
// shards, Shard(1), Partial sums, 0-dim and replicated plain tensors, dtype conversion, sharded output,
// replica verification, cancel and atomic output; and on the real fixtures, bit for bit.

#include "testutil.h"

#include "merge/box_copy.h"
#include "model/convert.h"
#include "merge/hf_output.h"
#include "io/mapped_file.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "compare/model_compare.h"
#include "formats/safetensors_reader.h"
#include "formats/scan.h"
#include "pickle/torch_save_writer.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <random>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

/// Global tensors of the synthetic model, as float values (stored in each tensor's dtype).
struct Global {
    DType dtype;
    Shape shape;
    std::vector<float> values;
};

std::vector<std::uint8_t> encode(const std::vector<float>& values, DType dtype)
{
    std::vector<std::uint8_t> out(values.size() * dtypeSize(dtype));
    if (dtype == DType::Int64) {
        for (std::size_t i = 0; i < values.size(); ++i) {
            const auto v = static_cast<std::int64_t>(values[i]);
            std::memcpy(out.data() + i * 8, &v, 8);
        }
        return out;
    }
    if (!values.empty())
        (void)convertElements(values.data(), DType::Float32, out.data(), dtype, values.size());
    return out;
}

/// Local tensors of one rank: (spec, bytes).
using RankData = std::vector<std::pair<TorchSaveTensor, std::vector<std::uint8_t>>>;

DeviceMesh mesh2() { return DeviceMesh { { 2 }, { "fsdp" }, { 0, 1 } }; }

/// Slices rows [r0, r1) or cols of a 2-D global.
std::vector<float> slice(const Global& g, int dim, std::int64_t begin, std::int64_t end)
{
    std::vector<float> out;
    const std::int64_t rows = g.shape[0], cols = g.shape.size() > 1 ? g.shape[1] : 1;
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            const std::int64_t k = dim == 0 ? r : c;
            if (k >= begin && k < end)
                out.push_back(g.values[static_cast<std::size_t>(r * cols + c)]);
        }
    return out;
}

void addDTensor(RankData& rank, const std::string& name, const Global& g, const std::vector<Placement>& placements,
                int coord, const Shape& localShape, const std::vector<float>& local)
{
    TorchSaveTensor t;
    t.name = name;
    t.dtype = g.dtype;
    t.shape = localShape;
    t.dtensor = true;
    t.globalShape = g.shape;
    t.placements = placements;
    t.mesh = mesh2();
    t.coordinate = { coord };
    rank.emplace_back(t, encode(local, g.dtype));
}

void addPlain(RankData& rank, const std::string& name, const Global& g)
{
    TorchSaveTensor t;
    t.name = name;
    t.dtype = g.dtype;
    t.shape = g.shape;
    rank.emplace_back(t, encode(g.values, g.dtype));
}

void writeRank(const std::string& dir, int r, const RankData& data)
{
    std::vector<TorchSaveTensor> specs;
    for (const auto& [t, bytes] : data)
        specs.push_back(t);
    auto status = writeTorchSave(dir + "/model_world_size_2_rank_" + std::to_string(r) + ".pt", specs,
                                 [&](std::size_t i, std::uint64_t off, std::uint8_t* dst, std::uint64_t n) {
                                     std::memcpy(dst, data[i].second.data() + off, n);
                                     return Status::success();
                                 });
    QVERIFY2(status.ok(), status.ok() ? "" : status.error().message.c_str());
}

std::vector<float> iota(std::int64_t n, float scale)
{
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        v[static_cast<std::size_t>(i)] = scale * static_cast<float>(i + 1) + 0.25f;
    return v;
}

} // namespace

class TestMergeEngine : public QObject {
    Q_OBJECT

    std::string m_dir;
    std::map<std::string, Global> m_expected;

private Q_SLOTS:
    void initTestCase()
    {
        m_dir = test::makeTempDir() + "/actor";
        fs::create_directories(m_dir + "/huggingface");
        test::writeFile(m_dir + "/huggingface/config.json",
                        "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"tie_word_embeddings\": true,\n"
                        "  \"torch_dtype\": \"bfloat16\"\n}\n");
        test::writeFile(m_dir + "/huggingface/tokenizer_config.json", "{\"x\": 1}");
        Global a { DType::BFloat16, { 5, 3 }, iota(15, 1.5f) };      // uneven Shard(0): 3 + 2 rows
        Global b { DType::Float32, { 4, 6 }, iota(24, -0.7f) };      // Shard(1): gathered
        Global c { DType::BFloat16, {}, { 3.5f } };                  // 0-dim, plain on both ranks
        Global d { DType::Float32, { 3 }, { 1.0f, 2.5f, -4.0f } };   // Partial: terms d/4 and 3d/4
        Global e { DType::Int64, { 4 }, { 7, 8, 9, 10 } };           // integer replica
        Global f { DType::BFloat16, { 1, 4 }, iota(4, 2.0f) };       // Shard(0) of 1 row: rank 1 empty
        Global embed { DType::BFloat16, { 4, 2 }, iota(8, 0.5f) };
        RankData r0, r1;
        addDTensor(r0, "model.embed_tokens.weight", embed, { Placement::shard(0) }, 0, { 2, 2 }, slice(embed, 0, 0, 2));
        addDTensor(r1, "model.embed_tokens.weight", embed, { Placement::shard(0) }, 1, { 2, 2 }, slice(embed, 0, 2, 4));
        addDTensor(r0, "a", a, { Placement::shard(0) }, 0, { 3, 3 }, slice(a, 0, 0, 3));
        addDTensor(r1, "a", a, { Placement::shard(0) }, 1, { 2, 3 }, slice(a, 0, 3, 5));
        addDTensor(r0, "b", b, { Placement::shard(1) }, 0, { 4, 3 }, slice(b, 1, 0, 3));
        addDTensor(r1, "b", b, { Placement::shard(1) }, 1, { 4, 3 }, slice(b, 1, 3, 6));
        addPlain(r0, "c", c);
        addPlain(r1, "c", c);
        std::vector<float> d0, d1;
        for (float v : d.values) {
            d0.push_back(v / 4);
            d1.push_back(3 * v / 4);
        }
        addDTensor(r0, "d", d, { Placement::partial() }, 0, { 3 }, d0);
        addDTensor(r1, "d", d, { Placement::partial() }, 1, { 3 }, d1);
        addPlain(r0, "e", e);
        addPlain(r1, "e", e);
        addDTensor(r0, "f", f, { Placement::shard(0) }, 0, { 1, 4 }, f.values);
        addDTensor(r1, "f", f, { Placement::shard(0) }, 1, { 0, 4 }, {});
        addDTensor(r0, "lm_head.weight", embed, { Placement::shard(0) }, 0, { 2, 2 }, slice(embed, 0, 0, 2));
        addDTensor(r1, "lm_head.weight", embed, { Placement::shard(0) }, 1, { 2, 2 }, slice(embed, 0, 2, 4));
        writeRank(m_dir, 0, r0);
        writeRank(m_dir, 1, r1);
        m_expected = { { "a", a }, { "b", b }, { "c", c }, { "d", d }, { "e", e }, { "f", f },
                       { "model.embed_tokens.weight", embed } };
    }

    void scansWhatItWrote()
    {
        auto info = scanCheckpoint(m_dir);
        QVERIFY_RESULT(info);
        QVERIFY2(info->problems.empty(), info->problems.empty() ? "" : info->problems.front().text().c_str());
        QCOMPARE(info->tensors.size(), std::size_t(8));
        QCOMPARE(info->find("c")->pieces.size(), std::size_t(2));
        QCOMPARE(int(info->find("c")->pieces[1].role), int(PieceRole::Replica));
    }

    void mergesBitExact()
    {
        auto info = scanCheckpoint(m_dir);
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY_RESULT(plan);
        QCOMPARE(plan->dropped.size(), std::size_t(1)); // tied lm_head
        const std::string out = test::makeTempDir() + "/out";
        MergeRunOptions run;
        run.threads = 3;
        run.verifyReplicas = true;
        std::size_t lastTensors = 0;
        run.onProgress = [&](const MergeProgress& p) { lastTensors = p.tensorsDone; };
        auto outcome = mergeCheckpoint(*info, *plan, out, run);
        QVERIFY_RESULT(outcome);
        QVERIFY(outcome->warnings.empty());
        QCOMPARE(lastTensors, plan->tensors.size());
        QVERIFY(fs::exists(out + "/tokenizer_config.json"));
        QCOMPARE(test::readFile(out + "/config.json"), test::readFile(m_dir + "/huggingface/config.json"));
        auto header = readSafetensorsFile(out + "/model.safetensors");
        QVERIFY_RESULT(header);
        QCOMPARE(header->metadata.at("format"), std::string("pt"));
        QCOMPARE(header->tensors.size(), m_expected.size());
        const std::string bytes = test::readFile(out + "/model.safetensors");
        for (const auto& t : header->tensors) {
            const Global& g = m_expected.at(t.name);
            QCOMPARE(t.dtype, g.dtype);
            QCOMPARE(t.shape, g.shape);
            const auto want = encode(g.values, g.dtype);
            QCOMPARE(t.end - t.begin, std::uint64_t(want.size()));
            QVERIFY2(std::memcmp(bytes.data() + t.begin, want.data(), want.size()) == 0, t.name.c_str());
        }
        // No temporary folder is left next to the output.
        for (const auto& entry : fs::directory_iterator(fs::path(out).parent_path()))
            QVERIFY(entry.path().filename().string().find(".tessera-") == std::string::npos);
    }

    void convertsDtypeAndRewritesConfig()
    {
        auto info = scanCheckpoint(m_dir);
        QVERIFY_RESULT(info);
        MergeOptions options;
        options.dtype = DType::Float32;
        auto plan = planMerge(*info, options);
        QVERIFY_RESULT(plan);
        const std::string out = test::makeTempDir() + "/f32";
        QVERIFY_RESULT(mergeCheckpoint(*info, *plan, out, {}));
        const std::string config = test::readFile(out + "/config.json");
        QVERIFY(config.find("\"torch_dtype\": \"float32\"") != std::string::npos);
        QVERIFY(config.find("\"tie_word_embeddings\": true") != std::string::npos);
        auto header = readSafetensorsFile(out + "/model.safetensors");
        QVERIFY_RESULT(header);
        for (const auto& t : header->tensors)
            QCOMPARE(t.dtype, t.name == "e" ? DType::Int64 : DType::Float32); // integers never convert
    }

    void shardsOutputLikeHuggingFace()
    {
        auto info = scanCheckpoint(m_dir);
        QVERIFY_RESULT(info);
        MergeOptions options;
        options.maxShardSize = 40;
        auto plan = planMerge(*info, options);
        QVERIFY_RESULT(plan);
        QVERIFY(plan->files.size() > 1);
        const std::string out = test::makeTempDir() + "/sharded";
        QVERIFY_RESULT(mergeCheckpoint(*info, *plan, out, {}));
        auto model = scanSafetensorsFolder(out);
        QVERIFY_RESULT(model);
        QVERIFY(model->problems.empty());
        QCOMPARE(model->tensors.size(), m_expected.size());
        CompareOptions compare;
        auto report = compareWithReference(*info, *plan, out, compare);
        QVERIFY_RESULT(report);
        QVERIFY2(report->ok(), report->text().c_str());
    }

    void cancelLeavesNothing()
    {
        auto info = scanCheckpoint(m_dir);
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY_RESULT(plan);
        const std::string parent = test::makeTempDir();
        fs::create_directories(parent + "/out");
        test::writeFile(parent + "/out/notes.txt", "mine");
        std::atomic<bool> cancel { true };
        MergeRunOptions run;
        run.cancel = &cancel;
        auto outcome = mergeCheckpoint(*info, *plan, parent + "/out", run);
        QVERIFY(!outcome.ok());
        QVERIFY(outcome.error().isCanceled());
        std::vector<std::string> left;
        for (const auto& entry : fs::directory_iterator(parent))
            left.push_back(entry.path().filename().string());
        QCOMPARE(left, std::vector<std::string> { "out" });
        QCOMPARE(test::readFile(parent + "/out/notes.txt"), std::string("mine"));
        QVERIFY(!fs::exists(parent + "/out/model.safetensors"));
    }

    void refusesForeignWeightsInTarget()
    {
        auto info = scanCheckpoint(m_dir);
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY_RESULT(plan);
        const std::string out = test::makeTempDir() + "/busy";
        fs::create_directories(out);
        test::writeFile(out + "/model-00001-of-00002.safetensors", "old");
        auto outcome = mergeCheckpoint(*info, *plan, out, {});
        QVERIFY(!outcome.ok());
        QVERIFY(outcome.error().message.find("model-00001-of-00002.safetensors") != std::string::npos);
        QCOMPARE(test::readFile(out + "/model-00001-of-00002.safetensors"), std::string("old"));
    }

    void fixturesMergeBitExact_data()
    {
        QTest::addColumn<QString>("checkpoint");
        QTest::addColumn<QString>("config");
        QTest::addColumn<QString>("reference");
        for (const char* c : { "fsdp2_llama_w4", "fsdp2_qwen2_w2_fp32", "fsdp1_llama_w2_dtensor", "hsdp_qwen2_2x2" }) {
            const std::string base = test::fixture(c);
            QTest::newRow(c) << QString::fromStdString(base + "/global_step_10/actor") << QString()
                             << QString::fromStdString(base + "/reference");
            if (fs::exists(base + "/dcp"))
                QTest::newRow((std::string(c) + "/dcp").c_str())
                    << QString::fromStdString(base + "/dcp")
                    << QString::fromStdString(base + "/global_step_10/actor/huggingface")
                    << QString::fromStdString(base + "/reference");
        }
    }
    void fixturesMergeBitExact()
    {
        QFETCH(QString, checkpoint);
        QFETCH(QString, config);
        QFETCH(QString, reference);
        ScanOptions scan;
        scan.hfModelPath = config.toStdString();
        auto info = scanCheckpoint(checkpoint.toStdString(), scan);
        QVERIFY_RESULT(info);
        auto plan = planMerge(*info, {});
        QVERIFY_RESULT(plan);
        const std::string out = test::makeTempDir() + "/model";
        QVERIFY_RESULT(mergeCheckpoint(*info, *plan, out, {}));
        for (const auto& entry : fs::directory_iterator(reference.toStdString())) {
            const std::string name = entry.path().filename().string();
            QVERIFY2(test::readFile(entry.path().string()) == test::readFile(out + "/" + name), name.c_str());
        }
    }

    void boxCopyMergesContiguousRuns()
    {
        int calls = 0;
        forEachRun({ 2, 3, 4 }, { 12, 4, 1 }, { 24, 4, 1 }, [&](std::uint64_t, std::uint64_t, std::uint64_t n) {
            ++calls;
            QCOMPARE(n, std::uint64_t(12));
        });
        QCOMPARE(calls, 2);
        calls = 0;
        forEachRun({}, {}, {}, [&](std::uint64_t, std::uint64_t, std::uint64_t n) {
            ++calls;
            QCOMPARE(n, std::uint64_t(1));
        });
        QCOMPARE(calls, 1);
        QVERIFY(boxIsContiguousInTensor({ 3, 0 }, { 2, 5 }, { 8, 5 }));
        QVERIFY(!boxIsContiguousInTensor({ 0, 2 }, { 2, 3 }, { 8, 5 }));
    }

    void boxCopyTransposesLineByLine()
    {
        // A [3, 4, 1, 5] box read transposed from a row-major [5, 4, 3] source, and written back transposed: equal
        // to the element-by-element copy for each element size the line loop specialises and for one it does not.
        const Shape shape { 3, 4, 1, 5 };
        std::mt19937 gen(7);
        for (std::size_t es : { std::size_t(1), std::size_t(2), std::size_t(4), std::size_t(8), std::size_t(3) }) {
            // Source: row-major [5, 4, 3] read as [3, 4, 1, 5] (a transpose of its first and last dims).
            const Shape src { 1, 3, 0, 12 }, dstStrides { 20, 5, 5, 1 };
            std::vector<std::uint8_t> in(60 * es), out(60 * es, 0), expected(60 * es, 0);
            for (auto& b : in)
                b = static_cast<std::uint8_t>(gen());
            for (std::int64_t a = 0; a < 3; ++a)
                for (std::int64_t b = 0; b < 4; ++b)
                    for (std::int64_t d = 0; d < 5; ++d)
                        std::memcpy(expected.data() + static_cast<std::size_t>(a * 20 + b * 5 + d) * es,
                                    in.data() + static_cast<std::size_t>(a * 1 + b * 3 + d * 12) * es, es);
            copyBox(in.data(), src, shape, es, out.data(), dstStrides);
            QVERIFY2(out == expected, qPrintable(QString::number(es)));
            // And back: a destination strided in its innermost dim.
            std::vector<std::uint8_t> back(60 * es, 0);
            copyBox(expected.data(), dstStrides, shape, es, back.data(), src);
            QVERIFY2(back == in, qPrintable(QString::number(es)));
        }
    }

    void rewritesOnlyTheDtype()
    {
        const std::string text = "{\n  \"a\": {\"torch_dtype\": \"float16\"},\n  \"dtype\" :\"bfloat16\",\n  \"b\": 1\n}\n";
        auto out = rewriteConfigDtype(text, DType::Float32);
        QVERIFY_RESULT(out);
        QCOMPARE(*out, std::string("{\n  \"a\": {\"torch_dtype\": \"float32\"},\n  \"dtype\" :\"float32\",\n  \"b\": 1\n}\n"));
    }
};

QTEST_GUILESS_MAIN(TestMergeEngine)
#include "tst_merge_engine.moc"
