// SPDX-License-Identifier: GPL-3.0-or-later
// The diff engine (`tessera diff`, the workbench's diff view): pairing, statuses, statistics, tolerances, NaN
// handling and the per-tensor detail, on the fixtures and on small safetensors files written here.

#include "testutil.h"

#include "model/convert.h"
#include "formats/safetensors_reader.h"
#include "formats/safetensors_writer.h"
#include "formats/scan.h"
#include "compare/tensor_diff.h"

#include <QTest>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A tensor for writeSafetensors(): values given as doubles, stored in `dtype`.
struct Spec {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<double> values;
};

std::string encode(const Spec& s)
{
    std::string bytes(s.values.size() * dtypeSize(s.dtype), '\0');
    if (isFloatingPoint(s.dtype)) {
        const Status st = convertElements(s.values.data(), DType::Float64, bytes.data(), s.dtype, s.values.size());
        if (!st)
            qFatal("%s", st.error().message.c_str());
    } else {
        for (std::size_t i = 0; i < s.values.size(); ++i) {
            const auto v = static_cast<std::int64_t>(s.values[i]);
            std::memcpy(bytes.data() + i * dtypeSize(s.dtype), &v, dtypeSize(s.dtype)); // little-endian
        }
    }
    return bytes;
}

std::string writeModel(const std::string& dir, const std::vector<Spec>& specs)
{
    fs::create_directories(dir);
    std::vector<SafetensorsEntry> entries;
    for (const auto& s : specs)
        entries.push_back({ s.name, s.dtype, s.shape });
    const std::string path = dir + "/model.safetensors";
    const Status st = writeSafetensorsFile(path, entries, {}, [&](std::size_t i, std::uint8_t* dst, std::uint64_t n) {
        const std::string bytes = encode(specs[i]);
        std::memcpy(dst, bytes.data(), std::min<std::uint64_t>(n, bytes.size()));
        return Status::success();
    });
    if (!st)
        qFatal("%s", st.error().message.c_str());
    return dir;
}

CheckpointInfo scan(const std::string& path)
{
    auto info = scanCheckpoint(path);
    if (!info)
        qFatal("%s", info.error().message.c_str());
    return std::move(*info);
}

const TensorDiff& row(const DiffReport& r, const std::string& name)
{
    for (const auto& t : r.tensors)
        if (t.name == name)
            return t;
    qFatal("no row %s", name.c_str());
}

std::vector<double> ramp(std::size_t n, double scale = 0.01)
{
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = (static_cast<double>(i) - static_cast<double>(n) / 2) * scale;
    return v;
}

/// Copies `reference/model.safetensors` of a fixture and adds `delta` to element `flat` of `tensor` (bf16 or f32).
/// Returns the folder; `before`/`after` receive the element's values.
std::string patchedCopy(const std::string& fixture, const std::string& tensor, std::uint64_t flat, float delta,
                        double* before, double* after)
{
    const std::string dir = test::makeTempDir() + "/patched";
    fs::create_directories(dir);
    const std::string src = test::fixture(fixture + "/reference");
    for (const auto& entry : fs::directory_iterator(src))
        fs::copy_file(entry.path(), dir + "/" + entry.path().filename().string());
    const std::string file = dir + "/model.safetensors";
    fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
    auto header = readSafetensorsFile(file);
    if (!header)
        qFatal("%s", header.error().message.c_str());
    std::string bytes = test::readFile(file);
    for (const auto& t : header->tensors) {
        if (t.name != tensor)
            continue;
        const std::size_t es = dtypeSize(t.dtype);
        char* p = bytes.data() + t.begin + flat * es;
        double v = 0;
        (void)convertElements(p, t.dtype, &v, DType::Float64, 1);
        *before = v;
        const double changed = v + delta;
        (void)convertElements(&changed, DType::Float64, p, t.dtype, 1);
        (void)convertElements(p, t.dtype, after, DType::Float64, 1);
        test::writeFile(file, bytes);
        return dir;
    }
    qFatal("no tensor %s", tensor.c_str());
}

class CanceledFromTheStart final : public Progress {
public:
    bool isCanceled() const override { return true; }
};

class CancelAfter final : public Progress {
public:
    explicit CancelAfter(std::uint64_t n) : m_n(n) { }
    void report(std::uint64_t done, std::uint64_t, const std::string&) override
    {
        if (done >= m_n)
            m_cancel = true;
    }
    bool isCanceled() const override { return m_cancel; }

private:
    std::uint64_t m_n;
    std::atomic<bool> m_cancel { false };
};

} // namespace

class TestTensorDiff : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void fixtureMatchesItsReference_data()
    {
        QTest::addColumn<QString>("a");
        QTest::addColumn<QString>("b");
        for (const char* c : { "fsdp2_llama_w4", "hsdp_qwen2_2x2", "fsdp2_qwen2_w2_fp32" })
            QTest::newRow(c) << QString::fromStdString(test::fixture(std::string(c) + "/global_step_10/actor"))
                             << QString::fromStdString(test::fixture(std::string(c) + "/reference"));
        QTest::newRow("dcp") << QString::fromStdString(test::fixture("fsdp2_llama_w4/dcp"))
                             << QString::fromStdString(test::fixture("fsdp2_llama_w4/reference"));
    }
    void fixtureMatchesItsReference()
    {
        QFETCH(QString, a);
        QFETCH(QString, b);
        const auto infoA = scan(a.toStdString());
        const auto infoB = scan(b.toStdString());
        DiffOptions options;
        options.threads = 2;
        std::size_t streamed = 0;
        auto report = diffCheckpoints(infoA, infoB, options, silentProgress(),
                                      [&](std::size_t, const TensorDiff&) { ++streamed; });
        QVERIFY_RESULT(report);
        QVERIFY(!report->tensors.empty());
        QCOMPARE(streamed, report->tensors.size());
        for (const auto& t : report->tensors) {
            QVERIFY2(t.status == DiffStatus::Identical, (t.name + ": " + diffStatusName(t.status) + " " + t.detail).c_str());
            QVERIFY(t.bitEqual);
            QCOMPARE(t.maxAbsDiff, 0.0);
            QCOMPARE(t.differing, std::uint64_t(0));
            QCOMPARE(t.cosine, 1.0);
            QCOMPARE(t.a.mean, t.b.mean);
        }
        QVERIFY(report->ok());
        QCOMPARE(report->tensors.size(), infoB.tensors.size());
    }

    void configsSayWhenTheModelsDiffer()
    {
        const std::string base = test::makeTempDir();
        auto config = [&](const std::string& name, const std::string& json) {
            fs::create_directories(base + "/" + name);
            test::writeFile(base + "/" + name + "/config.json", json);
            return base + "/" + name;
        };
        const std::string llama = config("a", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
                                                  "vocab_size": 512, "rope_theta": 10000.0})");
        const std::string same = config("b", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64.0,
                                                 "vocab_size": 512, "rope_theta": 500000.0})");
        const std::string other = config("c", R"({"architectures": ["Gemma3ForConditionalGeneration"],
                                                  "text_config": {"hidden_size": 128, "vocab_size": 512}})");
        // 64 and 64.0 are one size; rope_theta does not make another model.
        QVERIFY(compareModelConfigs(llama, same).empty());
        const auto differences = compareModelConfigs(llama, other);
        QCOMPARE(differences.size(), std::size_t(2));
        QCOMPARE(differences[0].key, std::string("architectures"));
        QCOMPARE(differences[1].key, std::string("hidden_size")); // found inside text_config
        QCOMPARE(differences[1].b, std::string("128"));
        QCOMPARE(describeConfigDifferences(differences),
                 std::string("A and B are different models (config.json): architectures [\"LlamaForCausalLM\"] in A, "
                             "[\"Gemma3ForConditionalGeneration\"] in B; hidden_size 64 in A, 128 in B"));
        QVERIFY(describeConfigDifferences({}).empty());
        // No config.json on a side: nothing to say, the tensors tell.
        QVERIFY(compareModelConfigs(llama, base).empty());
        QVERIFY(compareModelConfigs("", other).empty());
        // The report carries it.
        const auto infoA = scan(test::fixture("fsdp2_llama_w4/reference"));
        const auto infoB = scan(test::fixture("hsdp_qwen2_2x2/reference"));
        auto report = diffCheckpoints(infoA, infoB, DiffOptions {});
        QVERIFY_RESULT(report);
        QVERIFY(!report->configDifferences.empty());
        auto sameModel = diffCheckpoints(infoA, infoA, DiffOptions {});
        QVERIFY_RESULT(sameModel);
        QVERIFY(sameModel->configDifferences.empty());
    }

    void gapsAreMissingNotZeros()
    {
        // A rank file cut in half: its quarter of every tensor is missing, never read as zeros.
        const std::string copy = test::copyFixtureFolder("fsdp2_llama_w4");
        const std::string rank2 = copy + "/global_step_10/actor/model_world_size_4_rank_2.pt";
        fs::resize_file(rank2, fs::file_size(rank2) / 2);
        const auto infoA = scan(copy + "/global_step_10/actor");
        const auto infoB = scan(test::fixture("fsdp2_llama_w4/reference"));
        // Every tensor the file held is flagged, besides the file itself.
        std::size_t flagged = 0;
        for (const auto& t : infoA.tensors)
            for (const auto& p : infoA.problems)
                if (p.tensor == t.name) {
                    QVERIFY2(p.message.find("incomplete: ") == 0, p.message.c_str());
                    ++flagged;
                    break;
                }
        QCOMPARE(flagged, infoA.tensors.size());
        QCOMPARE(infoA.problems.size(), infoA.tensors.size() + 1);

        auto report = diffCheckpoints(infoA, infoB, DiffOptions {});
        QVERIFY_RESULT(report);
        QVERIFY(!report->ok());
        QCOMPARE(report->count(DiffStatus::Incomplete), infoA.tensors.size());
        QVERIFY(report->summary().find("incomplete") != std::string::npos);
        const TensorDiff& embed = row(*report, "model.embed_tokens.weight");
        QCOMPARE(embed.missingA, embed.elements / 4);
        QCOMPARE(embed.missingB, std::uint64_t(0));
        QVERIFY(!embed.bitEqual);
        QCOMPARE(embed.differing, std::uint64_t(0)); // the elements both hold are equal
        QCOMPARE(embed.a.finite + embed.a.nan + embed.a.inf, embed.elements - embed.missingA);
        // B holds every element: its own statistics take them all; only the pair's leave A's gaps out.
        QCOMPARE(embed.b.finite + embed.b.nan + embed.b.inf, embed.elements);
        QCOMPARE(embed.comparedElements(), embed.elements - embed.missingA);
        QVERIFY2(embed.detail.find("A has no data for 8192 of 32768 elements") == 0, embed.detail.c_str());

        // Swapped, B lacks them; the detail view draws the missing rows as missing cells.
        auto detail = diffTensorDetail(infoB, infoA, "model.embed_tokens.weight", DiffOptions {});
        QVERIFY_RESULT(detail);
        QCOMPARE(detail->summary.status, DiffStatus::Incomplete);
        QCOMPARE(detail->summary.missingB, embed.missingA);
        const Heatmap& h = detail->heatmap;
        QCOMPARE(h.missingB.size(), h.absDiff.size());
        // Rows 256:384 of 512 are rank 2's: cell rows 64:96 of 128, missing in B and in |A − B|, never in A.
        for (int r = 0; r < h.rows; ++r)
            for (int c = 0; c < h.cols; ++c) {
                const std::size_t at = std::size_t(r * h.cols + c);
                QCOMPARE(int(h.missingB[at]), r >= 64 && r < 96 ? 1 : 0);
                QCOMPARE(int(h.missingDiff[at]), int(h.missingB[at]));
                QCOMPARE(int(h.missingA[at]), 0);
                QVERIFY(std::isfinite(h.a[at])); // A's values where B has none
            }
        // Each side's histogram holds every value it has.
        for (const auto& [histogram, expected] : { std::pair { &detail->valuesA, embed.elements },
                                                   std::pair { &detail->valuesB, embed.elements - embed.missingA } }) {
            double counted = 0;
            for (double c : histogram->counts)
                counted += c;
            QCOMPARE(counted, static_cast<double>(expected));
        }

        // A complete pair has no missing cells at all.
        auto complete = diffTensorDetail(infoB, infoB, "model.embed_tokens.weight", DiffOptions {});
        QVERIFY_RESULT(complete);
        QVERIFY(complete->heatmap.missingA.empty() && complete->heatmap.missingB.empty()
                && complete->heatmap.missingDiff.empty());
        QCOMPARE(complete->summary.status, DiffStatus::Identical);
    }

    void oneChangedValueIsFoundExactly()
    {
        const std::string tensor = "model.layers.1.mlp.down_proj.weight";
        double before = 0, after = 0;
        const std::uint64_t flat = 37;
        const std::string patched = patchedCopy("fsdp2_llama_w4", tensor, flat, 0.25f, &before, &after);
        QVERIFY(before != after);
        const auto infoA = scan(test::fixture("fsdp2_llama_w4/global_step_10/actor"));
        const auto infoB = scan(patched);
        auto report = diffCheckpoints(infoA, infoB, DiffOptions {});
        QVERIFY_RESULT(report);
        QCOMPARE(report->count(DiffStatus::Different), std::size_t(1));
        QCOMPARE(report->count(DiffStatus::Identical), report->tensors.size() - 1);
        QCOMPARE(report->failures(), std::size_t(1));
        const TensorDiff& t = row(*report, tensor);
        QCOMPARE(t.status, DiffStatus::Different);
        QCOMPARE(t.differing, std::uint64_t(1));
        QCOMPARE(t.outsideTolerance, std::uint64_t(1));
        QCOMPARE(t.worstIndex, std::int64_t(flat));
        QCOMPARE(t.maxAbsDiff, std::fabs(before - after)); // exact: both sides are bf16 values, float64 holds the difference
        QCOMPARE(t.maxRelDiff, std::fabs(before - after) / std::fabs(after));
        QCOMPARE(t.meanAbsDiff, std::fabs(before - after) / static_cast<double>(t.elements));
        QVERIFY(!t.bitEqual);
        QVERIFY(t.cosine < 1 && t.cosine > 0.99);

        auto detail = diffTensorDetail(infoA, infoB, tensor, DiffOptions {});
        QVERIFY_RESULT(detail);
        QCOMPARE(detail->worst.size(), std::size_t(1));
        const Shape expected = unflattenIndex(flat, t.shapeA);
        QCOMPARE(detail->worst[0].index, expected);
        QCOMPARE(detail->worst[0].flat, flat);
        QCOMPARE(detail->worst[0].a, before);
        QCOMPARE(detail->worst[0].b, after);
        QCOMPARE(detail->summary.maxAbsDiff, t.maxAbsDiff);
        // Histograms count every element; the difference histogram has the one change off the centre bin.
        double countA = 0, countB = 0, countD = 0;
        for (double c : detail->valuesA.counts)
            countA += c;
        for (double c : detail->valuesB.counts)
            countB += c;
        for (double c : detail->differences.counts)
            countD += c;
        QCOMPARE(countA, static_cast<double>(t.elements));
        QCOMPARE(countB, static_cast<double>(t.elements));
        QCOMPARE(countD, static_cast<double>(t.elements));
        QCOMPARE(detail->valuesA.lo, detail->valuesB.lo);
        QCOMPARE(detail->valuesA.counts.size(), std::size_t(64));
        // The heatmap keeps the changed element visible as the only non-zero |A−B| cell, with its exact value.
        const Heatmap& h = detail->heatmap;
        QCOMPARE(h.sourceCols, t.shapeA.back());
        int nonZero = 0;
        double cellMax = 0;
        for (double v : h.absDiff)
            if (v > 0) {
                ++nonZero;
                cellMax = v;
            }
        QCOMPARE(nonZero, 1);
        QCOMPARE(cellMax, t.maxAbsDiff);
        QVERIFY(h.rows <= 128 && h.cols <= 128);
        QCOMPARE(h.a.size(), std::size_t(h.rows) * std::size_t(h.cols));

        // With a tolerance that covers the change it passes, but is not identical.
        DiffOptions loose;
        loose.atol = 0.5;
        auto passing = diffCheckpoints(infoA, infoB, loose);
        QVERIFY_RESULT(passing);
        QVERIFY(passing->ok());
        QCOMPARE(row(*passing, tensor).status, DiffStatus::WithinTolerance);
        QCOMPARE(row(*passing, tensor).differing, std::uint64_t(1));
        QCOMPARE(row(*passing, tensor).outsideTolerance, std::uint64_t(0));
    }

    void missingExtraShapeAndDtype()
    {
        const std::string root = test::makeTempDir();
        const auto a = scan(writeModel(root + "/a", { { "same", DType::Float32, { 2, 3 }, ramp(6) },
                                                      { "only_a", DType::Float32, { 4 }, ramp(4) },
                                                      { "reshaped", DType::Float32, { 2, 2 }, ramp(4) },
                                                      { "retyped", DType::Float32, { 3 }, { 1.0, 2.0, 0.5 } } }));
        const auto b = scan(writeModel(root + "/b", { { "same", DType::Float32, { 2, 3 }, ramp(6) },
                                                      { "reshaped", DType::Float32, { 4 }, ramp(4) },
                                                      { "retyped", DType::BFloat16, { 3 }, { 1.0, 2.0, 0.5 } },
                                                      { "only_b", DType::Int64, { 2 }, { 1, 2 } } }));
        auto report = diffCheckpoints(a, b, DiffOptions {});
        QVERIFY_RESULT(report);
        QCOMPARE(report->tensors.size(), std::size_t(5));
        QCOMPARE(row(*report, "same").status, DiffStatus::Identical);
        QCOMPARE(row(*report, "only_a").status, DiffStatus::MissingInB);
        QCOMPARE(row(*report, "only_b").status, DiffStatus::MissingInA);
        QCOMPARE(row(*report, "reshaped").status, DiffStatus::ShapeMismatch);
        QVERIFY(!row(*report, "reshaped").compared);
        const TensorDiff& retyped = row(*report, "retyped");
        QCOMPARE(retyped.status, DiffStatus::DtypeMismatch);
        // The values are still compared: these three are exact in bfloat16.
        QVERIFY(retyped.compared);
        QCOMPARE(retyped.differing, std::uint64_t(0));
        QVERIFY(retyped.detail.find("bfloat16") != std::string::npos);
        // Report order: A's order (the file's, sorted by the writer), then B-only names.
        for (std::size_t i = 0; i < a.tensors.size(); ++i)
            QCOMPARE(report->tensors[i].name, a.tensors[i].name);
        QCOMPARE(report->tensors.back().name, std::string("only_b"));
        QCOMPARE(report->failures(), std::size_t(4));
        QVERIFY(!report->ok());
        QVERIFY(!diffTensorDetail(a, b, "only_a", DiffOptions {}));
        QVERIFY(!diffTensorDetail(a, b, "reshaped", DiffOptions {}));
        QVERIFY(!diffTensorDetail(a, b, "nothing", DiffOptions {}));
    }

    void nanAndInfinity()
    {
        const std::string root = test::makeTempDir();
        const auto a = scan(writeModel(root + "/a", { { "nan_same", DType::Float32, { 3 }, { 1, kNaN, 3 } },
                                                      { "nan_opposite_number", DType::Float32, { 3 }, { 1, kNaN, 3 } },
                                                      { "inf_same", DType::Float32, { 2 }, { kInf, -kInf } },
                                                      { "inf_vs_number", DType::Float32, { 2 }, { kInf, 1 } },
                                                      { "signed_zero", DType::Float32, { 2 }, { 0.0, 1 } } }));
        const auto b = scan(writeModel(root + "/b", { { "nan_same", DType::Float32, { 3 }, { 1, kNaN, 3 } },
                                                      { "nan_opposite_number", DType::Float32, { 3 }, { 1, 2, 3 } },
                                                      { "inf_same", DType::Float32, { 2 }, { kInf, -kInf } },
                                                      { "inf_vs_number", DType::Float32, { 2 }, { 5, 1 } },
                                                      { "signed_zero", DType::Float32, { 2 }, { -0.0, 1 } } }));
        DiffOptions loose;
        loose.atol = 1e9; // no tolerance excuses a NaN or an infinity
        auto report = diffCheckpoints(a, b, loose);
        QVERIFY_RESULT(report);
        const TensorDiff& same = row(*report, "nan_same");
        QCOMPARE(same.status, DiffStatus::Identical);
        QCOMPARE(same.a.nan, std::uint64_t(1));
        QCOMPARE(same.b.nan, std::uint64_t(1));
        QCOMPARE(same.a.mean, 2.0); // over finite values
        const TensorDiff& opposite = row(*report, "nan_opposite_number");
        QCOMPARE(opposite.status, DiffStatus::Different);
        QCOMPARE(opposite.differing, std::uint64_t(1));
        QCOMPARE(opposite.maxAbsDiff, kInf);
        QCOMPARE(opposite.worstIndex, std::int64_t(1));
        QCOMPARE(opposite.meanAbsDiff, 0.0); // the finite pairs are equal
        QCOMPARE(opposite.nanOpposite, std::uint64_t(1));
        QCOMPARE(row(*report, "inf_vs_number").nanOpposite, std::uint64_t(0));
        QCOMPARE(row(*report, "inf_same").status, DiffStatus::Identical);
        QCOMPARE(row(*report, "inf_same").a.inf, std::uint64_t(2));
        QCOMPARE(row(*report, "inf_vs_number").status, DiffStatus::Different);
        QCOMPARE(row(*report, "inf_vs_number").worstIndex, std::int64_t(0));
        // −0 == +0: equal values, different bytes.
        const TensorDiff& zero = row(*report, "signed_zero");
        QCOMPARE(zero.status, DiffStatus::WithinTolerance);
        QVERIFY(!zero.bitEqual);
        QCOMPARE(zero.differing, std::uint64_t(0));

        auto detail = diffTensorDetail(a, b, "nan_opposite_number", loose);
        QVERIFY_RESULT(detail);
        QCOMPARE(detail->worst.size(), std::size_t(1));
        QCOMPARE(detail->worst[0].flat, std::uint64_t(1));
        QVERIFY(std::isnan(detail->worst[0].a));
        QCOMPARE(detail->worst[0].absDiff, kInf);
    }

    void tolerances_data()
    {
        QTest::addColumn<double>("atol");
        QTest::addColumn<double>("rtol");
        QTest::addColumn<int>("status");
        QTest::addColumn<int>("outside");
        // a = b + 0.001 for b = 1 and b = 100: absolute error 0.001 on both (exact in float64 from these doubles).
        QTest::newRow("exact") << 0.0 << 0.0 << int(DiffStatus::Different) << 2;
        QTest::newRow("atol covers") << 0.002 << 0.0 << int(DiffStatus::WithinTolerance) << 0;
        QTest::newRow("atol too small") << 0.0005 << 0.0 << int(DiffStatus::Different) << 2;
        QTest::newRow("rtol covers the large one") << 0.0 << 0.0001 << int(DiffStatus::Different) << 1;
        QTest::newRow("rtol covers both") << 0.0 << 0.01 << int(DiffStatus::WithinTolerance) << 0;
    }
    void tolerances()
    {
        QFETCH(double, atol);
        QFETCH(double, rtol);
        QFETCH(int, status);
        QFETCH(int, outside);
        const std::string root = test::makeTempDir();
        const auto a = scan(writeModel(root + "/a", { { "w", DType::Float64, { 2 }, { 1.001, 100.001 } } }));
        const auto b = scan(writeModel(root + "/b", { { "w", DType::Float64, { 2 }, { 1.0, 100.0 } } }));
        DiffOptions options;
        options.atol = atol;
        options.rtol = rtol;
        auto report = diffCheckpoints(a, b, options);
        QVERIFY_RESULT(report);
        const TensorDiff& t = row(*report, "w");
        QCOMPARE(int(t.status), status);
        QCOMPARE(t.outsideTolerance, std::uint64_t(outside));
        QCOMPARE(t.differing, std::uint64_t(2));
        QCOMPARE(report->atol, atol);
    }

    void integersCompareExactly()
    {
        const std::string root = test::makeTempDir();
        const auto a = scan(writeModel(root + "/a", { { "ids", DType::Int64, { 4 }, { 1, 2, 3, 4 } },
                                                      { "mask", DType::Bool, { 3 }, { 1, 0, 1 } } }));
        const auto b = scan(writeModel(root + "/b", { { "ids", DType::Int64, { 4 }, { 1, 2, 3, 5 } },
                                                      { "mask", DType::Bool, { 3 }, { 1, 0, 1 } } }));
        DiffOptions loose;
        loose.atol = 100;
        loose.rtol = 1;
        auto report = diffCheckpoints(a, b, loose);
        QVERIFY_RESULT(report);
        const TensorDiff& ids = row(*report, "ids");
        QCOMPARE(ids.status, DiffStatus::Different);
        QCOMPARE(ids.outsideTolerance, std::uint64_t(1));
        QCOMPARE(ids.maxAbsDiff, 1.0);
        QCOMPARE(ids.worstIndex, std::int64_t(3));
        QCOMPARE(row(*report, "mask").status, DiffStatus::Identical);
    }

    void oneTensorOnItsOwn()
    {
        const std::string root = test::makeTempDir();
        const auto info = scan(writeModel(root + "/one", { { "w", DType::Float32, { 2, 4 }, { 1, 2, 0, 4, kNaN, kInf, -kInf, 3 } },
                                                          { "ids", DType::Int64, { 3 }, { 7, 0, 7 } } }));
        auto stats = tensorStatistics(info, "w", 10);
        QVERIFY_RESULT(stats);
        QVERIFY(stats->numeric);
        QCOMPARE(stats->elements, std::uint64_t(8));
        QCOMPARE(stats->missing, std::uint64_t(0));
        QCOMPARE(stats->stats.finite, std::uint64_t(5));
        QCOMPARE(stats->stats.nan, std::uint64_t(1));
        QCOMPARE(stats->stats.inf, std::uint64_t(2));
        QCOMPARE(stats->stats.zeros, std::uint64_t(1));
        QCOMPARE(stats->stats.min, 0.0);
        QCOMPARE(stats->stats.max, 4.0);
        QCOMPARE(stats->stats.mean, 2.0);
        QCOMPARE(stats->stats.std, std::sqrt(2.0));
        double counted = 0;
        for (double c : stats->values.counts)
            counted += c;
        QCOMPARE(counted, 5.0);
        QCOMPARE(stats->values.counts.size(), std::size_t(10));
        auto ids = tensorStatistics(info, "ids");
        QVERIFY_RESULT(ids);
        QCOMPARE(ids->stats.max, 7.0);
        QCOMPARE(ids->stats.zeros, std::uint64_t(1));
        QVERIFY(!tensorStatistics(info, "nope"));

        // A rank's file cut short: its elements are missing, not zeros.
        const std::string copy = test::copyFixtureFolder("fsdp2_llama_w4");
        const std::string rank2 = copy + "/global_step_10/actor/model_world_size_4_rank_2.pt";
        fs::resize_file(rank2, fs::file_size(rank2) / 2);
        auto gappy = tensorStatistics(scan(copy + "/global_step_10/actor"), "model.embed_tokens.weight");
        QVERIFY_RESULT(gappy);
        QCOMPARE(gappy->missing, gappy->elements / 4);
        QCOMPARE(gappy->stats.finite + gappy->stats.nan + gappy->stats.inf, gappy->elements - gappy->missing);

        CancelAfter cancel(1);
        QVERIFY(!tensorStatistics(info, "w", 10, cancel));
    }

    void statistics()
    {
        const std::string root = test::makeTempDir();
        const auto a = scan(writeModel(root + "/a", { { "v", DType::Float64, { 4 }, { 1, 2, 3, 4 } } }));
        const auto b = scan(writeModel(root + "/b", { { "v", DType::Float64, { 4 }, { 2, 4, 6, 8 } } }));
        auto report = diffCheckpoints(a, b, DiffOptions {});
        QVERIFY_RESULT(report);
        const TensorDiff& t = row(*report, "v");
        QCOMPARE(t.a.min, 1.0);
        QCOMPARE(t.a.max, 4.0);
        QCOMPARE(t.a.mean, 2.5);
        QCOMPARE(t.a.std, std::sqrt(1.25));
        QCOMPARE(t.b.mean, 5.0);
        QCOMPARE(t.maxAbsDiff, 4.0);
        QCOMPARE(t.meanAbsDiff, 2.5);
        QCOMPARE(t.maxRelDiff, 0.5);
        QVERIFY(std::fabs(t.cosine - 1.0) < 1e-15); // parallel vectors
        QCOMPARE(t.worstIndex, std::int64_t(3));
    }

    void detailOfAThreeDimensionalTensor()
    {
        // [3, 200, 300]: rows fold to 600, columns 300; reduced to 128 × 128 cells.
        const std::size_t n = 3 * 200 * 300;
        std::vector<double> values = ramp(n, 1e-4);
        std::vector<double> changed = values;
        const std::uint64_t flat = 2 * 200 * 300 + 150 * 300 + 7; // [2, 150, 7]
        changed[flat] += 1;
        changed[5] -= 0.5; // [0, 0, 5]
        const std::string root = test::makeTempDir();
        const auto a = scan(writeModel(root + "/a", { { "t", DType::Float32, { 3, 200, 300 }, changed } }));
        const auto b = scan(writeModel(root + "/b", { { "t", DType::Float32, { 3, 200, 300 }, values } }));
        DiffOptions options;
        options.worstCount = 3;
        auto detail = diffTensorDetail(a, b, "t", options);
        QVERIFY_RESULT(detail);
        QCOMPARE(detail->worst.size(), std::size_t(2)); // only differing elements are listed
        QCOMPARE(detail->worst[0].index, (Shape { 2, 150, 7 }));
        QCOMPARE(detail->worst[1].index, (Shape { 0, 0, 5 }));
        const Heatmap& h = detail->heatmap;
        QCOMPARE(h.sourceRows, std::int64_t(600));
        QCOMPARE(h.sourceCols, std::int64_t(300));
        QCOMPARE(h.rows, 128);
        QCOMPARE(h.cols, 128);
        // Source row 550 (= 2·200 + 150) falls in the cell row whose block holds it.
        int cellRow = 0;
        while (h.rowBegin(cellRow + 1) <= 550)
            ++cellRow;
        int cellCol = 0;
        while (h.colBegin(cellCol + 1) <= 7)
            ++cellCol;
        const double cell = h.absDiff[std::size_t(cellRow) * 128 + std::size_t(cellCol)];
        QCOMPARE(cell, detail->worst[0].absDiff);
        // Column 5 of row 0 is in cell column 2 (columns 4–6).
        QCOMPARE(h.colBegin(2), std::int64_t(4));
        QCOMPARE(h.absDiff[2], detail->worst[1].absDiff);
        int nonZero = 0;
        for (double v : h.absDiff)
            nonZero += v > 0 ? 1 : 0;
        QCOMPARE(nonZero, 2);
    }

    void deterministicAcrossThreads()
    {
        const auto a = scan(test::fixture("hsdp_qwen2_2x2/global_step_10/actor"));
        const auto b = scan(test::fixture("fsdp2_qwen2_w2_fp32/reference")); // another model: names overlap
        DiffOptions one, four;
        one.threads = 1;
        four.threads = 4;
        auto r1 = diffCheckpoints(a, b, one);
        auto r4 = diffCheckpoints(a, b, four);
        QVERIFY_RESULT(r1);
        QVERIFY_RESULT(r4);
        QCOMPARE(r1->tensors.size(), r4->tensors.size());
        for (std::size_t i = 0; i < r1->tensors.size(); ++i) {
            QCOMPARE(r1->tensors[i].name, r4->tensors[i].name);
            QCOMPARE(r1->tensors[i].status, r4->tensors[i].status);
            QCOMPARE(r1->tensors[i].maxAbsDiff, r4->tensors[i].maxAbsDiff);
            QCOMPARE(r1->tensors[i].cosine, r4->tensors[i].cosine);
        }
        QCOMPARE(r1->summary(), r4->summary());
    }

    void cancels()
    {
        const auto a = scan(test::fixture("fsdp2_llama_w4/global_step_10/actor"));
        const auto b = scan(test::fixture("fsdp2_llama_w4/reference"));
        CancelAfter progress(3);
        DiffOptions options;
        options.threads = 1;
        auto report = diffCheckpoints(a, b, options, progress);
        QVERIFY(!report);
        QVERIFY(report.error().isCanceled());
    }

    /// A tensor's detail canceled while side A is read says where it stopped ("A: canceled") and is still a
    /// cancel: the context added on the way up no longer hides it.
    void detailCanceledWhileReadingIsACancel()
    {
        const auto a = scan(test::fixture("fsdp2_llama_w4/global_step_10/actor"));
        const auto b = scan(test::fixture("fsdp2_llama_w4/reference"));
        CanceledFromTheStart progress;
        auto detail = diffTensorDetail(a, b, "model.embed_tokens.weight", DiffOptions {}, progress);
        QVERIFY(!detail);
        QCOMPARE(detail.error().message, std::string("A: canceled"));
        QVERIFY(detail.error().isCanceled());
    }

    void rejectsNegativeTolerance()
    {
        const auto a = scan(test::fixture("fsdp2_llama_w4/reference"));
        DiffOptions options;
        options.atol = -1;
        QVERIFY(!diffCheckpoints(a, a, options));
    }

    void unflattens()
    {
        QCOMPARE(unflattenIndex(0, { 2, 3 }), (Shape { 0, 0 }));
        QCOMPARE(unflattenIndex(5, { 2, 3 }), (Shape { 1, 2 }));
        QCOMPARE(unflattenIndex(7, { 2, 3, 4 }), (Shape { 0, 1, 3 }));
        QCOMPARE(unflattenIndex(0, {}), Shape {});
    }
};

QTEST_GUILESS_MAIN(TestTensorDiff)
#include "tst_tensor_diff.moc"
