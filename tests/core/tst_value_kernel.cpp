// SPDX-License-Identifier: GPL-3.0-or-later
// The statistics kernel (compare/value_kernel.h) against a plain float64 reference, element by element, on random
// values of every dtype it reads with NaN, ±Inf, ±0 and subnormals planted, lengths that are no multiple of the
// lanes, chunks or blocks, and gaps; the same bits whatever the thread count, from the AVX2 and the portable lanes,
// with and without the shortcut for equal bytes, and from values in memory or loaded block by block. Then the two
// places it reads from: `drift`'s change sums, and `diff` reading a checkpoint in place (its records' checksums
// summed on the way, so a flipped byte still fails the tensor).
#include "compare/change_kernel.h"
#include "compare/tensor_diff.h"
#include "compare/value_kernel.h"
#include "formats/scan.h"
#include "model/convert.h"
#include "testutil.h"

#include <QTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <vector>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The kernel's statistics computed the obvious way: one element at a time, in float64.
struct Reference {
    SideSums a, b;
    PairSums pair;
};

SideSums referenceSide(const std::vector<double>& v, const std::vector<std::uint8_t>& missing)
{
    SideSums s;
    double sum = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const double x = v[i];
        if (!missing.empty() && missing[i])
            continue;
        if (std::isnan(x) || std::isinf(x)) {
            ++(std::isnan(x) ? s.nan : s.inf);
            continue;
        }
        s.min = s.finite == 0 ? x : std::min(s.min, x);
        s.max = s.finite == 0 ? x : std::max(s.max, x);
        ++s.finite;
        s.zeros += x == 0 ? 1 : 0;
        sum += x;
        s.sumSquares += x * x;
    }
    s.mean = s.finite ? sum / static_cast<double>(s.finite) : 0;
    for (std::size_t i = 0; i < v.size(); ++i)
        if ((missing.empty() || !missing[i]) && std::isfinite(v[i]))
            s.m2 += (v[i] - s.mean) * (v[i] - s.mean);
    return s;
}

Reference reference(const std::vector<double>& x, const std::vector<double>& y, const std::vector<std::uint8_t>& missingA,
                    const std::vector<std::uint8_t>& missingB, double atol, double rtol, bool exact)
{
    Reference r { referenceSide(x, missingA), referenceSide(y, missingB), {} };
    PairSums& p = r.pair;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if ((!missingA.empty() && missingA[i]) || (!missingB.empty() && missingB[i])) {
            ++p.gaps;
            continue;
        }
        const double a = x[i], b = y[i];
        const bool finite = std::isfinite(a) && std::isfinite(b);
        if (finite) {
            const double d = a - b;
            p.minSigned = p.finitePairs == 0 ? d : std::min(p.minSigned, d);
            p.maxSigned = p.finitePairs == 0 ? d : std::max(p.maxSigned, d);
            ++p.finitePairs;
            p.dot += a * b;
            p.normA += a * a;
            p.normB += b * b;
            p.sumSquaredChange += d * d;
            p.sumAbsChange += std::fabs(d);
            p.maxAbsChange = std::max(p.maxAbsChange, std::fabs(d));
        }
        const bool nanA = std::isnan(a), nanB = std::isnan(b);
        const bool differs = exact ? a != b : (nanA || nanB ? !(nanA && nanB) : a != b);
        if (!differs)
            continue;
        const double abs = finite ? std::fabs(a - b) : kInf;
        ++p.differing;
        p.outside += exact || !finite || !(abs <= atol + rtol * std::fabs(b)) ? 1 : 0;
        p.nanOpposite += nanA != nanB ? 1 : 0;
        p.maxRelDiff = std::max(p.maxRelDiff, finite && b != 0 ? abs / std::fabs(b) : kInf);
        if (p.worst < 0 || abs > p.maxAbsDiff) {
            p.maxAbsDiff = abs;
            p.worst = static_cast<std::int64_t>(i);
        }
    }
    return r;
}

/// Equal, or both NaN, or within `relative` of each other: for sums the kernel adds in another order.
bool near(double a, double b, double relative)
{
    return a == b || (std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= relative * std::max(std::fabs(a), std::fabs(b));
}

#define COMPARE_SIDE(k, r)                                                                                           \
    do {                                                                                                             \
        QCOMPARE((k).finite, (r).finite);                                                                            \
        QCOMPARE((k).nan, (r).nan);                                                                                  \
        QCOMPARE((k).inf, (r).inf);                                                                                  \
        QCOMPARE((k).zeros, (r).zeros);                                                                              \
        QCOMPARE((k).min, (r).min);                                                                                  \
        QCOMPARE((k).max, (r).max);                                                                                  \
        QVERIFY(near((k).mean, (r).mean, 1e-12) || std::fabs((k).mean - (r).mean) < 1e-15);                         \
        QVERIFY(near((k).m2, (r).m2, 1e-10));                                                                        \
        QVERIFY(near((k).sumSquares, (r).sumSquares, 1e-12));                                                        \
    } while (false)

/// Every statistic bit for bit.
bool sameBits(const ValueSums& l, const ValueSums& r)
{
    return std::memcmp(&l.a, &r.a, sizeof l.a) == 0 && std::memcmp(&l.b, &r.b, sizeof l.b) == 0
        && std::memcmp(&l.pair, &r.pair, sizeof l.pair) == 0 && l.sameBytes == r.sameBytes;
}

/// `values` stored as `dtype` (and read back: the values the kernel sees).
std::vector<std::uint8_t> stored(std::vector<double>& values, DType dtype)
{
    std::vector<std::uint8_t> bytes(values.size() * dtypeSize(dtype));
    if (isFloatingPoint(dtype)) {
        (void)convertElements(values.data(), DType::Float64, bytes.data(), dtype, values.size());
        (void)convertElements(bytes.data(), dtype, values.data(), DType::Float64, values.size());
        return bytes;
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
        const double v = std::fabs(values[i]) < 1e9 ? std::round(values[i] * 8) : 3; // NaN, ±Inf and 3e38 too
        const std::int64_t whole = dtype == DType::Bool ? (v != 0) : static_cast<std::int64_t>(v);
        const std::int64_t kept = dtypeSize(dtype) == 1 && dtype != DType::Int8 ? std::abs(whole) % 200 : whole;
        std::memcpy(bytes.data() + i * dtypeSize(dtype), &kept, dtypeSize(dtype)); // little-endian
    }
    toDoubles(bytes.data(), dtype, values.data(), values.size());
    return bytes;
}

ValueSpan spanOf(const std::vector<std::uint8_t>& bytes, DType dtype, const std::vector<std::uint8_t>& missing)
{
    ValueSpan s;
    s.dtype = dtype;
    s.data = bytes.data();
    s.missing = missing.empty() ? nullptr : missing.data();
    return s;
}

/// The same values handed over block by block, as a tensor read from its files is.
ValueSpan loadedSpanOf(const std::vector<std::uint8_t>& bytes, DType dtype, const std::vector<std::uint8_t>& missing)
{
    ValueSpan s = spanOf(bytes, dtype, missing);
    s.data = nullptr;
    s.load = [&bytes, dtype](std::uint64_t first, std::uint64_t count, std::uint8_t* dst) {
        std::memcpy(dst, bytes.data() + first * dtypeSize(dtype), count * dtypeSize(dtype));
        return Status::success();
    };
    return s;
}

} // namespace

class TestValueKernel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void matchesTheReference_data()
    {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<qulonglong>("count");
        QTest::addColumn<bool>("gaps");
        for (DType t : { DType::BFloat16, DType::Float16, DType::Float32, DType::Float64, DType::Int64, DType::Int32,
                         DType::UInt8, DType::Bool })
            for (qulonglong n : { 1ull, 3ull, 7ull, 1023ull, 1025ull, 65537ull, 200003ull })
                for (bool gaps : { false, true })
                    QTest::addRow("%s %llu%s", std::string(torchName(t)).c_str(), n, gaps ? " gaps" : "")
                        << int(t) << n << gaps;
    }
    void matchesTheReference()
    {
        QFETCH(int, dtype);
        QFETCH(qulonglong, count);
        QFETCH(bool, gaps);
        const DType t = DType(dtype);
        const std::size_t n = count;
        std::mt19937_64 rng(n * 31 + std::size_t(dtype) * 7 + (gaps ? 1 : 0));
        std::normal_distribution<double> normal(0.25, 2.0);
        std::vector<double> x(n), y(n);
        for (std::size_t i = 0; i < n; ++i) {
            x[i] = normal(rng);
            y[i] = rng() % 3 == 0 ? x[i] : x[i] + normal(rng) * 1e-2; // a third equal, the rest nearly
        }
        const double specials[] = { kNaN, kInf, -kInf, 0.0, -0.0, 1e-310, 6e-8, -6e-8, 1e-40, 3e38 };
        for (std::size_t k = 0; k < std::min<std::size_t>(n, 60); ++k) {
            x[rng() % n] = specials[rng() % 10];
            y[rng() % n] = specials[rng() % 10];
        }
        if (n > 10) {
            x[7] = y[7] = kNaN;  // NaN opposite NaN is equal
            x[8] = 0.0;
            y[8] = -0.0;         // so are the two zeros
        }
        const auto bytesA = stored(x, t), bytesB = stored(y, t);
        std::vector<std::uint8_t> missingA, missingB;
        if (gaps) {
            missingA.resize(n);
            missingB.resize(n);
            for (std::size_t i = 0; i < n; ++i) {
                missingA[i] = rng() % 7 == 0;
                missingB[i] = i > n / 2 && rng() % 3 == 0;
            }
        }
        const bool exact = !isFloatingPoint(t);
        const Reference r = reference(x, y, missingA, missingB, 1e-3, 1e-2, exact);
        const ValueSpan a = spanOf(bytesA, t, missingA), b = spanOf(bytesB, t, missingB);
        KernelOptions options;
        options.atol = 1e-3;
        options.rtol = 1e-2;
        options.threads = 1;
        auto sums = valueSums(a, &b, n, options);
        QVERIFY_RESULT(sums);
        COMPARE_SIDE(sums->a, r.a);
        COMPARE_SIDE(sums->b, r.b);
        const PairSums& p = sums->pair;
        QCOMPARE(p.gaps, r.pair.gaps);
        QCOMPARE(p.finitePairs, r.pair.finitePairs);
        QVERIFY(near(p.dot, r.pair.dot, 1e-12));
        QVERIFY(near(p.normA, r.pair.normA, 1e-12));
        QVERIFY(near(p.normB, r.pair.normB, 1e-12));
        QVERIFY(near(p.sumSquaredChange, r.pair.sumSquaredChange, 1e-12));
        QVERIFY(near(p.sumAbsChange, r.pair.sumAbsChange, 1e-12));
        QCOMPARE(p.maxAbsChange, r.pair.maxAbsChange);
        QCOMPARE(p.minSigned, r.pair.minSigned);
        QCOMPARE(p.maxSigned, r.pair.maxSigned);
        QCOMPARE(p.differing, r.pair.differing);
        QCOMPARE(p.outside, r.pair.outside);
        QCOMPARE(p.nanOpposite, r.pair.nanOpposite);
        QCOMPARE(p.maxAbsDiff, r.pair.maxAbsDiff);
        QCOMPARE(p.maxRelDiff, r.pair.maxRelDiff);
        QCOMPARE(p.worst, r.pair.worst);
        QCOMPARE(sums->sameBytes, bytesA == bytesB);

        // The same bits whatever the threads, from the portable lanes, and from values loaded block by block.
        for (unsigned threads : { 2u, 3u, 8u }) {
            options.threads = threads;
            auto again = valueSums(a, &b, n, options);
            QVERIFY_RESULT(again);
            QVERIFY(sameBits(*sums, *again));
        }
        options.simd = false;
        auto portable = valueSums(a, &b, n, options);
        QVERIFY_RESULT(portable);
        QVERIFY(sameBits(*sums, *portable));
        options.simd = true;
        const ValueSpan la = loadedSpanOf(bytesA, t, missingA), lb = loadedSpanOf(bytesB, t, missingB);
        auto loaded = valueSums(la, &lb, n, options);
        QVERIFY_RESULT(loaded);
        QVERIFY(sameBits(*sums, *loaded));

        // One side alone: its statistics are the pair's A.
        options.work = KernelWork::Side;
        auto side = valueSums(a, nullptr, n, options);
        QVERIFY_RESULT(side);
        QVERIFY(std::memcmp(&side->a, &sums->a, sizeof side->a) == 0);

        // `drift`'s sums: the counts, Σ x², and the change over elements finite on both sides.
        options.work = KernelWork::Change;
        auto change = valueSums(a, &b, n, options);
        QVERIFY_RESULT(change);
        QCOMPARE(change->a.nan, r.a.nan);
        QCOMPARE(change->b.inf, r.b.inf);
        QVERIFY(near(change->a.sumSquares, r.a.sumSquares, 1e-12));
        QVERIFY(near(change->b.sumSquares, r.b.sumSquares, 1e-12));
        QVERIFY(near(change->pair.sumSquaredChange, r.pair.sumSquaredChange, 1e-12));
        QCOMPARE(change->pair.maxAbsChange, r.pair.maxAbsChange);
        options.simd = false;
        auto changePortable = valueSums(a, &b, n, options);
        QVERIFY_RESULT(changePortable);
        QVERIFY(sameBits(*change, *changePortable));
    }

    /// A pair with equal bytes is summed once, B's statistics being A's; the shortcut changes no bit of the result.
    void equalBytesAreSummedOnce_data()
    {
        QTest::addColumn<int>("dtype");
        for (DType t : { DType::BFloat16, DType::Float16, DType::Float32, DType::Float64, DType::Int32 })
            QTest::newRow(std::string(torchName(t)).c_str()) << int(t);
    }
    void equalBytesAreSummedOnce()
    {
        QFETCH(int, dtype);
        const DType t = DType(dtype);
        const std::size_t n = 150001;
        std::mt19937_64 rng(5);
        std::normal_distribution<double> normal(-1, 3);
        std::vector<double> x(n), y;
        for (auto& v : x)
            v = normal(rng);
        x[3] = kNaN;
        x[70000] = -kInf;
        y = x;
        auto bytes = stored(x, t);
        // One element changed, far into the tensor: the chunks before and after it stay equal.
        y[100000] = y[100000] + 1;
        auto changed = stored(y, t);
        for (const auto* second : { &bytes, &changed }) {
            const ValueSpan a = spanOf(bytes, t, {}), b = spanOf(*second, t, {});
            KernelOptions options;
            options.threads = 2;
            auto quick = valueSums(a, &b, n, options);
            options.skipEqualChunks = false;
            auto slow = valueSums(a, &b, n, options);
            QVERIFY_RESULT(quick);
            QVERIFY_RESULT(slow);
            QVERIFY(sameBits(*quick, *slow));
            QCOMPARE(quick->sameBytes, second == &bytes);
            if (second == &bytes) {
                QVERIFY(std::memcmp(&quick->a, &quick->b, sizeof quick->a) == 0);
                QCOMPARE(quick->pair.differing, std::uint64_t(0));
                QCOMPARE(quick->pair.worst, std::int64_t(-1));
            } else {
                QCOMPARE(quick->pair.differing, std::uint64_t(1));
                QCOMPARE(quick->pair.worst, std::int64_t(100000));
            }
        }
    }

    /// Large values are summed in float64: a relative change of 1e-6 on values near 1e4 is found to 1e-4 of
    /// itself, as float64 torch finds it.
    void changeSumsAreFloat64()
    {
        const std::size_t n = 1 << 20;
        std::vector<float> now(n), before(n);
        std::mt19937_64 rng(11);
        std::uniform_real_distribution<float> uniform(9000.0f, 11000.0f);
        double moved = 0, norm = 0;
        for (std::size_t i = 0; i < n; ++i) {
            before[i] = uniform(rng);
            now[i] = std::nextafter(before[i], 2e4f);
            const double d = double(now[i]) - double(before[i]);
            moved += d * d;
            norm += double(before[i]) * double(before[i]);
        }
        auto sums = changeSums(reinterpret_cast<const std::uint8_t*>(now.data()), DType::Float32,
                               reinterpret_cast<const std::uint8_t*>(before.data()), DType::Float32, n, 2);
        QVERIFY_RESULT(sums);
        const double relative = std::sqrt(sums->sumSquaredChange) / std::sqrt(sums->previousSumSquares);
        const double expected = std::sqrt(moved) / std::sqrt(norm);
        QVERIFY2(std::fabs(relative - expected) <= 1e-4 * expected, std::to_string(relative).c_str());
        QCOMPARE(sums->nan, std::uint64_t(0));
        QCOMPARE(sums->previousNonFinite, std::uint64_t(0));
        QVERIFY(sums->maxAbsChange > 0 && sums->maxAbsChange <= 0.001);
        // The first step has no previous one: its sums only.
        auto first = changeSums(reinterpret_cast<const std::uint8_t*>(now.data()), DType::Float32, nullptr,
                                DType::Float32, n, 1);
        QVERIFY_RESULT(first);
        QVERIFY(near(first->sumSquares, sums->sumSquares, 0));
        QCOMPARE(first->previousSumSquares, 0.0);
        QVERIFY(!changeSums(reinterpret_cast<const std::uint8_t*>(now.data()), DType::Int32, nullptr, DType::Float32,
                            n, 1)); // drift compares floating tensors only
    }

    void refusesWhatItCannotRead()
    {
        const std::uint8_t bytes[4] = {};
        ValueSpan a;
        a.dtype = DType::Float8_e4m3fn;
        a.data = bytes;
        QVERIFY(!valueSums(a, nullptr, 4, {}));
        QVERIFY(!kernelReads(DType::Complex64));
    }

    void loadErrorsAndCancelAreErrors()
    {
        std::vector<std::uint8_t> bytes(300000 * 4);
        ValueSpan a = spanOf(bytes, DType::Float32, {});
        a.data = nullptr;
        a.load = [](std::uint64_t first, std::uint64_t, std::uint8_t*) {
            return first >= 65536 ? Status(makeError("gone")) : Status::success();
        };
        auto failed = valueSums(a, nullptr, 300000, {});
        QVERIFY(!failed);
        QCOMPARE(failed.error().message, std::string("gone"));
        KernelOptions options;
        options.canceled = [] { return true; };
        auto canceled = valueSums(spanOf(bytes, DType::Float32, {}), nullptr, 300000, options);
        QVERIFY(!canceled);
        QVERIFY(canceled.error().isCanceled());
    }

    /// `diff` reads a checkpoint's rank files in place: the same statistics as the detail, which assembles the
    /// tensor in memory, and a flipped byte in a rank's record still fails that tensor on its checksum.
    void diffReadsInPlaceAndStillChecksRecords()
    {
        const std::string copy = test::copyFixtureFolder("fsdp2_llama_w4");
        const std::string actor = copy + "/global_step_10/actor";
        auto scanned = scanCheckpoint(actor);
        QVERIFY_RESULT(scanned);
        const auto reference = scanCheckpoint(test::fixture("fsdp2_llama_w4/reference"));
        QVERIFY_RESULT(reference);
        const std::string name = "model.layers.1.mlp.down_proj.weight";
        DiffOptions options;
        options.threads = 2;
        auto report = diffCheckpoints(*scanned, *reference, options);
        QVERIFY_RESULT(report);
        QVERIFY(report->ok());
        for (const auto& row : report->tensors) {
            auto detail = diffTensorDetail(*scanned, *reference, row.name, options);
            QVERIFY_RESULT(detail);
            QCOMPARE(detail->summary.a.mean, row.a.mean);
            QCOMPARE(detail->summary.a.std, row.a.std);
            QCOMPARE(detail->summary.b.min, row.b.min);
            QCOMPARE(detail->summary.status, row.status);
        }

        const TensorInfo* t = nullptr;
        for (const auto& tensor : scanned->tensors)
            if (tensor.name == name)
                t = &tensor;
        QVERIFY(t && !t->pieces.empty() && t->pieces.front().storageCrc32);
        const Piece& piece = t->pieces.front();
        {
            std::fstream file(piece.file, std::ios::in | std::ios::out | std::ios::binary);
            file.seekg(static_cast<std::streamoff>(piece.dataOffset + 10));
            char c = 0;
            file.get(c);
            file.seekp(static_cast<std::streamoff>(piece.dataOffset + 10));
            file.put(static_cast<char>(c ^ 0x01));
        }
        auto flipped = diffCheckpoints(*scanned, *reference, options);
        QVERIFY_RESULT(flipped);
        for (const auto& row : flipped->tensors) {
            if (row.name != name) {
                QCOMPARE(row.status, DiffStatus::Identical);
                continue;
            }
            QCOMPARE(row.status, DiffStatus::Failed);
            QVERIFY2(row.detail.find("CRC-32 mismatch") != std::string::npos, row.detail.c_str());
            QVERIFY2(row.detail.rfind("A: ", 0) == 0, row.detail.c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestValueKernel)
#include "tst_value_kernel.moc"
