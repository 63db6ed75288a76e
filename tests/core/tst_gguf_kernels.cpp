// SPDX-License-Identifier: GPL-3.0-or-later
// ggml's block kernels (formats/gguf_quant*.h) against ggml itself: for every quantized type, the quantizer must give
// exactly the bytes of libggml-base's quantize_row_*_ref and the dequantizer exactly the floats (bit for bit, any
// NaN for a NaN) of its dequantize_row_*, on rows of many kinds (normal at scales 1e-3 … 1e3, outliers, zero,
// constant and one-value blocks, subnormals, magnitudes below ggml's GROUP_MAX_EPS, one-signed rows, bf16 values,
// exact ties, zero sub-blocks; past what ggml is meant for, huge values and ±inf or NaN among them) and, for the
// dequantizers, on random bytes (fp16 scales that are inf or NaN included). The library is node-llama-cpp's
// prebuilt libggml-base.so under TESSERA_NODE_LLAMA (the folder holding node_modules, as for tst_gguf_llama);
// without it those functions skip. The rest needs no library: the table's rows (geometry, fallbacks), the error of
// a round trip within each type's bound, and the threaded driver.

#include "formats/gguf_quant.h"
#include "formats/gguf_quant_k.h"
#include "formats/gguf_quant_legacy.h"
#include "formats/gguf_types.h"
#include "model/convert.h"
#include "testutil.h"

#include <QTest>

#include <dlfcn.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

/// A quantized type, its name in ggml's function names, and where its fp16 fields lie in a block.
struct Kernel {
    GgmlType type;
    const char* ggmlName;
    std::vector<std::size_t> halfOffsets;
};

const std::vector<Kernel>& kernels()
{
    static const std::vector<Kernel> list = {
        { GgmlType::Q4_0, "q4_0", { offsetof(BlockQ4_0, d) } },
        { GgmlType::Q4_1, "q4_1", { offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m) } },
        { GgmlType::Q5_0, "q5_0", { offsetof(BlockQ5_0, d) } },
        { GgmlType::Q5_1, "q5_1", { offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m) } },
        { GgmlType::Q8_0, "q8_0", { offsetof(BlockQ8_0, d) } },
        { GgmlType::Q2_K, "q2_K", { offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin) } },
        { GgmlType::Q3_K, "q3_K", { offsetof(BlockQ3_K, d) } },
        { GgmlType::Q4_K, "q4_K", { offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin) } },
        { GgmlType::Q5_K, "q5_K", { offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin) } },
        { GgmlType::Q6_K, "q6_K", { offsetof(BlockQ6_K, d) } },
    };
    return list;
}

using OracleQuantize = void (*)(const float* x, void* y, std::int64_t k);
using OracleDequantize = void (*)(const void* x, float* y, std::int64_t k);

/// libggml-base.so under $TESSERA_NODE_LLAMA, or where it is missing.
struct Oracle {
    void* handle = nullptr;
    std::string missing;

    OracleQuantize quantize(const Kernel& k) const
    {
        return reinterpret_cast<OracleQuantize>(dlsym(handle, ("quantize_row_" + std::string(k.ggmlName) + "_ref").c_str()));
    }
    OracleDequantize dequantize(const Kernel& k) const
    {
        return reinterpret_cast<OracleDequantize>(dlsym(handle, ("dequantize_row_" + std::string(k.ggmlName)).c_str()));
    }
};

Oracle openOracle()
{
    Oracle oracle;
    const QByteArray modules = qgetenv("TESSERA_NODE_LLAMA");
    if (modules.isEmpty()) {
        oracle.missing = "TESSERA_NODE_LLAMA is not set (the folder where `npm install node-llama-cpp@3` was run)";
        return oracle;
    }
    const fs::path library = fs::path(modules.toStdString()) / "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
                             / "libggml-base.so";
    if (!fs::exists(library)) {
        oracle.missing = "no " + library.string();
        return oracle;
    }
    oracle.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!oracle.handle)
        oracle.missing = "cannot load " + library.string() + ": " + dlerror();
    return oracle;
}

float bitsFloat(std::uint32_t u)
{
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

std::uint32_t floatBits(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

/// Fills one block of `n` values of a kind.
using BlockFiller = std::function<void(std::mt19937& rng, float* x, std::size_t n)>;

struct Kind {
    std::string name;
    BlockFiller fill;
};

float logUniform(std::mt19937& rng, float lowExponent, float highExponent)
{
    return std::pow(10.0f, std::uniform_real_distribution<float>(lowExponent, highExponent)(rng));
}

float randomSign(std::mt19937& rng) { return (rng() & 1) ? 1.0f : -1.0f; }

BlockFiller normalAt(float sigma)
{
    return [sigma](std::mt19937& rng, float* x, std::size_t n) {
        std::normal_distribution<float> normal(0.0f, sigma);
        for (std::size_t i = 0; i < n; ++i)
            x[i] = normal(rng);
    };
}

/// Each value drawn by `one`, the block's own scale drawn first between 10^lo and 10^hi.
BlockFiller scaled(float lo, float hi, std::function<float(std::mt19937&, float)> one)
{
    return [=](std::mt19937& rng, float* x, std::size_t n) {
        const float sigma = logUniform(rng, lo, hi);
        for (std::size_t i = 0; i < n; ++i)
            x[i] = one(rng, sigma);
    };
}

float normalValue(std::mt19937& rng, float sigma) { return std::normal_distribution<float>(0.0f, sigma)(rng); }

std::vector<Kind> kinds()
{
    std::vector<Kind> list;
    for (float sigma : { 1e-3f, 1e-2f, 1e-1f, 1.0f, 10.0f, 1e2f, 1e3f })
        list.push_back({ "normal sigma " + std::to_string(sigma), normalAt(sigma) });
    list.push_back({ "outliers", [](std::mt19937& rng, float* x, std::size_t n) {
                        scaled(-3, 3, normalValue)(rng, x, n);
                        const int count = 1 + static_cast<int>(rng() % 4);
                        for (int k = 0; k < count; ++k)
                            x[rng() % n] *= randomSign(rng) * logUniform(rng, 1.3f, 3.0f);
                    } });
    list.push_back({ "zero", [](std::mt19937&, float* x, std::size_t n) { std::fill(x, x + n, 0.0f); } });
    list.push_back({ "constant", [](std::mt19937& rng, float* x, std::size_t n) {
                        std::fill(x, x + n, randomSign(rng) * logUniform(rng, -3, 3));
                    } });
    list.push_back({ "one nonzero", [](std::mt19937& rng, float* x, std::size_t n) {
                        std::fill(x, x + n, 0.0f);
                        x[rng() % n] = randomSign(rng) * logUniform(rng, -3, 3);
                    } });
    list.push_back({ "subnormal", [](std::mt19937& rng, float* x, std::size_t n) {
                        const std::uint32_t top = 1u << (1 + rng() % 23); // some blocks of tiny subnormals only
                        for (std::size_t i = 0; i < n; ++i)
                            x[i] = (rng() % 5 == 0) ? 0.0f : randomSign(rng) * bitsFloat(1 + rng() % top);
                    } });
    list.push_back({ "below GROUP_MAX_EPS", scaled(-20, -15.5f, normalValue) });
    list.push_back({ "around GROUP_MAX_EPS", scaled(-16, -14, normalValue) });
    list.push_back({ "negative only", scaled(-3, 3, [](std::mt19937& rng, float s) { return -std::fabs(normalValue(rng, s)); }) });
    list.push_back({ "positive only", scaled(-3, 3, [](std::mt19937& rng, float s) { return std::fabs(normalValue(rng, s)); }) });
    list.push_back({ "positive offset", scaled(-3, 3, [](std::mt19937& rng, float s) { return 3 * s + normalValue(rng, s); }) });
    list.push_back({ "bf16", [](std::mt19937& rng, float* x, std::size_t n) {
                        scaled(-3, 1, normalValue)(rng, x, n);
                        for (std::size_t i = 0; i < n; ++i) // round to nearest even bf16
                            x[i] = bitsFloat((floatBits(x[i]) + 0x7FFFu + ((floatBits(x[i]) >> 16) & 1u)) & 0xFFFF0000u);
                    } });
    list.push_back({ "small integers", [](std::mt19937& rng, float* x, std::size_t n) {
                        const float unit = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
                        const int span = 1 + static_cast<int>(rng() % 40);
                        for (std::size_t i = 0; i < n; ++i)
                            x[i] = unit * static_cast<float>(static_cast<int>(rng() % (2 * span + 1)) - span);
                    } });
    list.push_back({ "zero sub-blocks", [](std::mt19937& rng, float* x, std::size_t n) {
                        for (std::size_t g = 0; g < n; g += 16) {
                            const bool zero = rng() % 3 == 0;
                            const float sigma = logUniform(rng, -4, 2);
                            for (std::size_t i = g; i < g + 16; ++i)
                                x[i] = zero ? 0.0f : normalValue(rng, sigma);
                        }
                    } });
    list.push_back({ "mixed magnitudes", [](std::mt19937& rng, float* x, std::size_t n) {
                        for (std::size_t i = 0; i < n; ++i)
                            x[i] = normalValue(rng, logUniform(rng, -6, 3));
                    } });
    list.push_back({ "uniform", scaled(-3, 3, [](std::mt19937& rng, float s) {
                        return std::uniform_real_distribution<float>(-s, s)(rng);
                    }) });
    // Beyond what ggml is meant for, still byte for byte: scales that overflow fp16 or the fitting sums, and a
    // value that is ±inf or NaN (payloads included: a NaN scale is written as ggml writes it).
    list.push_back({ "huge", scaled(30, 38.5f, normalValue) });
    list.push_back({ "non-finite", [](std::mt19937& rng, float* x, std::size_t n) {
                        scaled(-3, 3, normalValue)(rng, x, n);
                        const float specials[] = { std::numeric_limits<float>::infinity(),
                                                   -std::numeric_limits<float>::infinity(),
                                                   std::numeric_limits<float>::quiet_NaN(), bitsFloat(0xFFC00000u),
                                                   bitsFloat(0x7FD12345u), bitsFloat(0xFFA00001u) };
                        x[rng() % n] = specials[rng() % std::size(specials)];
                    } });
    return list;
}

/// Rows of every kind, `blocksPerKind` blocks each, and the kind of each block.
struct Inputs {
    std::vector<float> values;
    std::vector<std::string> kindOfBlock;
};

Inputs inputs(std::uint64_t blockValues, std::size_t blocksPerKind, std::uint32_t seed)
{
    Inputs in;
    std::mt19937 rng(seed);
    for (const Kind& kind : kinds())
        for (std::size_t b = 0; b < blocksPerKind; ++b) {
            const std::size_t at = in.values.size();
            in.values.resize(at + blockValues);
            kind.fill(rng, in.values.data() + at, blockValues);
            in.kindOfBlock.push_back(kind.name);
        }
    return in;
}

bool sameFloat(float a, float b) { return floatBits(a) == floatBits(b) || (std::isnan(a) && std::isnan(b)); }

/// Empty when ours and ggml's floats agree bit for bit (NaN for NaN), else the first difference.
std::string firstFloatDifference(const std::vector<float>& ours, const std::vector<float>& theirs, std::uint64_t blockValues)
{
    for (std::size_t i = 0; i < ours.size(); ++i)
        if (!sameFloat(ours[i], theirs[i]))
            return "block " + std::to_string(i / blockValues) + " value " + std::to_string(i % blockValues) + ": "
                   + std::to_string(ours[i]) + " (bits " + std::to_string(floatBits(ours[i])) + ") vs ggml's "
                   + std::to_string(theirs[i]) + " (bits " + std::to_string(floatBits(theirs[i])) + ")";
    return {};
}

std::vector<std::uint8_t> quantizeOurs(const GgmlTypeInfo& row, const std::vector<float>& values)
{
    std::vector<std::uint8_t> bytes(row.bytesOf(values.size()));
    row.quantize(values.data(), values.size() / row.blockElements, bytes.data());
    return bytes;
}

std::vector<float> dequantizeOurs(const GgmlTypeInfo& row, const std::vector<std::uint8_t>& bytes)
{
    std::vector<float> values(bytes.size() / row.blockBytes * row.blockElements);
    row.dequantize(bytes.data(), bytes.size() / row.blockBytes, values.data());
    return values;
}

/// Random blocks, then blocks whose fp16 fields are each of the special halves in turn.
std::vector<std::uint8_t> randomBlocks(const Kernel& k, std::size_t blocks, std::uint32_t seed)
{
    const GgmlTypeInfo& row = ggmlType(k.type);
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> bytes(blocks * row.blockBytes);
    for (auto& b : bytes)
        b = static_cast<std::uint8_t>(rng());
    const std::uint16_t specials[] = { 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7FFF, 0x0000, 0x8000,
                                       0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00 };
    std::size_t b = 0;
    for (std::uint16_t special : specials)
        for (std::size_t field = 0; field < k.halfOffsets.size() && b < blocks; ++field, ++b)
            std::memcpy(bytes.data() + b * row.blockBytes + k.halfOffsets[field], &special, sizeof special);
    return bytes;
}

double rmsRelativeError(const std::vector<float>& x, const std::vector<float>& back)
{
    double error = 0;
    double norm = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        error += (static_cast<double>(back[i]) - x[i]) * (static_cast<double>(back[i]) - x[i]);
        norm += static_cast<double>(x[i]) * x[i];
    }
    return std::sqrt(error / norm);
}

} // namespace

class TestGgufKernels : public QObject {
    Q_OBJECT

private:
    Oracle m_oracle;

private Q_SLOTS:
    void initTestCase() { m_oracle = openOracle(); }

    void cleanupTestCase()
    {
        if (m_oracle.handle)
            dlclose(m_oracle.handle);
    }

    /// ggml's geometry (ggml-common.h) and llama-quant.cpp's fallbacks, and the lists made from the table.
    void tableRowsAreGgmls()
    {
        struct Expected {
            GgmlType type;
            const char* name;
            std::uint64_t values, bytes;
            GgmlType fallback;
        };
        const Expected expected[] = {
            { GgmlType::Q4_0, "Q4_0", 32, 18, GgmlType::F16 },  { GgmlType::Q4_1, "Q4_1", 32, 20, GgmlType::F16 },
            { GgmlType::Q5_0, "Q5_0", 32, 22, GgmlType::F16 },  { GgmlType::Q5_1, "Q5_1", 32, 24, GgmlType::F16 },
            { GgmlType::Q8_0, "Q8_0", 32, 34, GgmlType::F16 },  { GgmlType::Q2_K, "Q2_K", 256, 84, GgmlType::Q4_0 },
            { GgmlType::Q3_K, "Q3_K", 256, 110, GgmlType::Q4_0 }, { GgmlType::Q4_K, "Q4_K", 256, 144, GgmlType::Q5_0 },
            { GgmlType::Q5_K, "Q5_K", 256, 176, GgmlType::Q5_1 }, { GgmlType::Q6_K, "Q6_K", 256, 210, GgmlType::Q8_0 },
        };
        for (const Expected& e : expected) {
            const GgmlTypeInfo* row = findGgmlType(static_cast<std::uint32_t>(e.type));
            QVERIFY2(row && row->type == e.type, e.name);
            QCOMPARE(std::string(row->name), std::string(e.name));
            QCOMPARE(row->blockElements, e.values);
            QCOMPARE(row->blockBytes, e.bytes);
            QCOMPARE(row->fallback, e.fallback);
            QVERIFY(row->quantized() && row->dequantize && row->plainDtype == DType::Unknown);
        }
        QCOMPARE(ggmlTypes().size(), std::size(expected) + 3);
        QCOMPARE(ggmlTypeList(), std::string("F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K"));
        QVERIFY(!findGgmlType(4)); // Q4_2, long gone from ggml
        // A row of 4096 is whole super-blocks; 4128 (129 blocks of 32) falls back to the legacy type; 100 to F16.
        QCOMPARE(ggmlTypeForRows(GgmlType::Q4_K, 4096), GgmlType::Q4_K);
        QCOMPARE(ggmlTypeForRows(GgmlType::Q4_K, 4128), GgmlType::Q5_0);
        QCOMPARE(ggmlTypeForRows(GgmlType::Q2_K, 4128), GgmlType::Q4_0);
        QCOMPARE(ggmlTypeForRows(GgmlType::Q5_K, 4128), GgmlType::Q5_1);
        QCOMPARE(ggmlTypeForRows(GgmlType::Q6_K, 4128), GgmlType::Q8_0);
        QCOMPARE(ggmlTypeForRows(GgmlType::Q3_K, 100), GgmlType::F16);
        QCOMPARE(ggmlTypeForRows(GgmlType::Q4_1, 100), GgmlType::F16);
    }

    /// Normal rows come back within each type's error (RMS error over RMS value, about twice what the type
    /// gives); zero blocks come back as zeros; the threaded driver writes what the kernel writes on one thread.
    void roundTripsStayWithinTheTypesError()
    {
        const std::pair<GgmlType, double> bounds[] = {
            { GgmlType::Q4_0, 0.20 }, { GgmlType::Q4_1, 0.16 }, { GgmlType::Q5_0, 0.10 }, { GgmlType::Q5_1, 0.08 },
            { GgmlType::Q8_0, 0.01 }, { GgmlType::Q2_K, 0.60 }, { GgmlType::Q3_K, 0.35 }, { GgmlType::Q4_K, 0.16 },
            { GgmlType::Q5_K, 0.08 }, { GgmlType::Q6_K, 0.04 },
        };
        for (const auto& [type, bound] : bounds) {
            const GgmlTypeInfo& row = ggmlType(type);
            for (float sigma : { 1e-3f, 1.0f, 1e3f }) {
                std::mt19937 rng(7);
                std::vector<float> x(64 * 256);
                normalAt(sigma)(rng, x.data(), x.size());
                const std::vector<float> back = dequantizeOurs(row, quantizeOurs(row, x));
                const double error = rmsRelativeError(x, back);
                QVERIFY2(error < bound, qPrintable(QStringLiteral("%1 at sigma %2: relative RMS error %3")
                                                       .arg(QLatin1String(row.name)).arg(sigma).arg(error)));
            }
            const std::vector<float> zeros(2 * 256, 0.0f);
            for (float v : dequantizeOurs(row, quantizeOurs(row, zeros)))
                QCOMPARE(v, 0.0f);
            std::mt19937 rng(11);
            std::vector<float> x(300 * 256);
            normalAt(1.0f)(rng, x.data(), x.size());
            std::vector<std::uint8_t> threaded(row.bytesOf(x.size()));
            QVERIFY_RESULT(quantizeGgml(type, x.data(), x.size(), threaded.data(), 3));
            QVERIFY2(threaded == quantizeOurs(row, x), row.name);
        }
    }

    void quantizersMatchGgml_data()
    {
        QTest::addColumn<int>("kernel");
        for (std::size_t k = 0; k < kernels().size(); ++k)
            QTest::newRow(kernels()[k].ggmlName) << static_cast<int>(k);
    }

    /// Every block's bytes as quantize_row_*_ref writes them, and their dequantized floats as dequantize_row_*'s.
    void quantizersMatchGgml()
    {
        QFETCH(int, kernel);
        if (!m_oracle.handle)
            QSKIP(m_oracle.missing.c_str());
        const Kernel& k = kernels()[static_cast<std::size_t>(kernel)];
        const GgmlTypeInfo& row = ggmlType(k.type);
        const OracleQuantize theirQuantize = m_oracle.quantize(k);
        const OracleDequantize theirDequantize = m_oracle.dequantize(k);
        QVERIFY2(theirQuantize && theirDequantize, k.ggmlName);
        // 25 kinds: 7500 blocks of 32 values, 5000 super-blocks.
        const Inputs in = inputs(row.blockElements, row.blockElements == 32 ? 300 : 200, 2024u + static_cast<std::uint32_t>(kernel));
        const std::vector<std::uint8_t> ours = quantizeOurs(row, in.values);
        std::vector<std::uint8_t> theirs(ours.size());
        theirQuantize(in.values.data(), theirs.data(), static_cast<std::int64_t>(in.values.size()));
        for (std::size_t b = 0; b < in.kindOfBlock.size(); ++b) {
            const std::size_t at = b * row.blockBytes;
            if (std::memcmp(ours.data() + at, theirs.data() + at, row.blockBytes) == 0)
                continue;
            std::size_t byte = 0;
            while (ours[at + byte] == theirs[at + byte])
                ++byte;
            QFAIL(qPrintable(QStringLiteral("%1 block %2 (%3): byte %4 is %5, ggml's %6")
                                 .arg(QLatin1String(row.name)).arg(b).arg(QString::fromStdString(in.kindOfBlock[b])).arg(byte)
                                 .arg(ours[at + byte]).arg(theirs[at + byte])));
        }
        std::vector<float> theirValues(in.values.size());
        theirDequantize(theirs.data(), theirValues.data(), static_cast<std::int64_t>(theirValues.size()));
        const std::string difference = firstFloatDifference(dequantizeOurs(row, ours), theirValues, row.blockElements);
        QVERIFY2(difference.empty(), difference.c_str());
    }

    void dequantizersMatchGgmlOnAnyBytes_data() { quantizersMatchGgml_data(); }

    /// Any bytes at all, fp16 scales of inf, NaN, subnormals and the largest half included.
    void dequantizersMatchGgmlOnAnyBytes()
    {
        QFETCH(int, kernel);
        if (!m_oracle.handle)
            QSKIP(m_oracle.missing.c_str());
        const Kernel& k = kernels()[static_cast<std::size_t>(kernel)];
        const GgmlTypeInfo& row = ggmlType(k.type);
        const OracleDequantize theirDequantize = m_oracle.dequantize(k);
        QVERIFY(theirDequantize);
        const std::vector<std::uint8_t> bytes = randomBlocks(k, 5000, 99u + static_cast<std::uint32_t>(kernel));
        std::vector<float> theirs(bytes.size() / row.blockBytes * row.blockElements);
        theirDequantize(bytes.data(), theirs.data(), static_cast<std::int64_t>(theirs.size()));
        const std::string difference = firstFloatDifference(dequantizeOurs(row, bytes), theirs, row.blockElements);
        QVERIFY2(difference.empty(), difference.c_str());
    }
};

QTEST_GUILESS_MAIN(TestGgufKernels)
#include "tst_gguf_kernels.moc"
