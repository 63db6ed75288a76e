// SPDX-License-Identifier: GPL-3.0-or-later
// convertElements() must match torch's .to() bit for bit (NaN payloads aside). Checked two ways: hand-worked
// bit patterns for the edge cases, and against ATen itself (convertElementsWithATen) over every 16-bit pattern
// and millions of 32/64-bit ones, including ties, subnormals and double-rounding cases.
#include "model/convert.h"
#include "convert_aten.h"
#include "testutil.h"

#include <QTest>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace tessera;

namespace {

float f32(std::uint32_t bits)
{
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

std::uint32_t bits32(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

double f64(std::uint64_t bits)
{
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
}

bool isNan(const unsigned char* p, DType t)
{
    switch (t) {
    case DType::Float16: {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu);
    }
    case DType::BFloat16: {
        std::uint16_t b;
        std::memcpy(&b, p, 2);
        return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu);
    }
    case DType::Float32: {
        float f;
        std::memcpy(&f, p, 4);
        return std::isnan(f);
    }
    case DType::Float64: {
        double d;
        std::memcpy(&d, p, 8);
        return std::isnan(d);
    }
    default:
        return false;
    }
}

QString hex(const unsigned char* p, size_t n)
{
    QString out = QStringLiteral("0x");
    for (size_t i = n; i-- > 0;)
        out += QStringLiteral("%1").arg(p[i], 2, 16, QLatin1Char('0'));
    return out;
}

/// Converts `src` (raw bytes of `from`) with both implementations and compares every element's bits; NaNs only
/// have to stay NaNs. Returns the number of elements compared.
void compareWithATen(const std::vector<unsigned char>& src, DType from, DType to)
{
    const std::uint64_t count = src.size() / dtypeSize(from);
    std::vector<unsigned char> ours(count * dtypeSize(to), 0xAB);
    std::vector<unsigned char> theirs(count * dtypeSize(to), 0xCD);
    QVERIFY_RESULT(convertElements(src.data(), from, ours.data(), to, count));
    QVERIFY_RESULT(convertElementsWithATen(src.data(), from, theirs.data(), to, count));
    const size_t w = dtypeSize(to);
    int mismatches = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
        const unsigned char* a = ours.data() + i * w;
        const unsigned char* b = theirs.data() + i * w;
        if (std::memcmp(a, b, w) == 0)
            continue;
        if (isNan(a, to) && isNan(b, to) && ((a[w - 1] ^ b[w - 1]) & 0x80u) == 0) // NaN, same sign
            continue;
        if (isNan(a, to) && isNan(b, to) && to == DType::BFloat16)
            continue; // ATen's scalar bf16 path drops the NaN sign (0x7FC0), its vector path writes 0xFFFF
        if (++mismatches <= 5)
            qWarning("%s → %s element %llu: source %s, ours %s, ATen %s", torchName(from).data(), torchName(to).data(),
                     static_cast<unsigned long long>(i), qPrintable(hex(src.data() + i * dtypeSize(from), dtypeSize(from))),
                     qPrintable(hex(a, w)), qPrintable(hex(b, w)));
    }
    QCOMPARE(mismatches, 0);
}

template <typename T>
std::vector<unsigned char> bytesOf(const std::vector<T>& values)
{
    std::vector<unsigned char> out(values.size() * sizeof(T));
    std::memcpy(out.data(), values.data(), out.size());
    return out;
}

std::vector<std::uint16_t> all16()
{
    std::vector<std::uint16_t> v(65536);
    for (std::uint32_t i = 0; i < 65536; ++i)
        v[i] = static_cast<std::uint16_t>(i);
    return v;
}

/// Float32 values around every Float16 and BFloat16 rounding boundary, plus a sweep of all exponents.
std::vector<float> interestingFloats()
{
    std::vector<float> v;
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
        // Float16 value h as float, the exact midpoint to h+1, and ±1 ulp around it.
        std::uint16_t hh = static_cast<std::uint16_t>(h);
        std::vector<unsigned char> one(2);
        std::memcpy(one.data(), &hh, 2);
        float base = 0;
        if (!convertElements(one.data(), DType::Float16, &base, DType::Float32, 1))
            continue;
        v.push_back(base);
        // BFloat16 boundaries: h as the top half of a float, its midpoint, and neighbours.
        const std::uint32_t b = h << 16;
        for (std::uint32_t delta : { 0x0u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x1u })
            v.push_back(f32(b + delta));
    }
    // Float16 midpoints: for each finite positive half h, (h + next)/2 is exact in float.
    for (std::uint32_t h = 0; h < 0x7C00u; ++h) {
        std::uint16_t pair[2] = { static_cast<std::uint16_t>(h), static_cast<std::uint16_t>(h + 1) };
        float f[2];
        if (!convertElements(pair, DType::Float16, f, DType::Float32, 2))
            continue;
        const float mid = (f[0] + f[1]) / 2; // exact: halves have ≤ 11 significant bits
        for (float x : { mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f) }) {
            v.push_back(x);
            v.push_back(-x);
        }
    }
    const float specials[] = { 0.0f,
                               -0.0f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               -std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::signaling_NaN(),
                               f32(0x7F800001u),
                               f32(0xFFC12345u),
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::lowest(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min(),
                               65504.0f,
                               65519.99f,
                               65520.0f,
                               -65520.0f,
                               1e-8f,
                               5.960464477539063e-08f,
                               2.980232238769531e-08f };
    v.insert(v.end(), std::begin(specials), std::end(specials));
    // A stride through every float bit pattern.
    for (std::uint64_t x = 0; x < 0x100000000ull; x += 4099)
        v.push_back(f32(static_cast<std::uint32_t>(x)));
    return v;
}

std::vector<double> interestingDoubles()
{
    std::vector<double> v;
    std::mt19937_64 rng(42);
    for (int i = 0; i < 1000000; ++i)
        v.push_back(f64(rng()));
    std::uniform_real_distribution<double> uni(-70000.0, 70000.0);
    for (int i = 0; i < 200000; ++i)
        v.push_back(uni(rng));
    // Double-rounding traps: a hair above a Float16/BFloat16 tie, below Float32 resolution, so torch's route
    // through Float32 lands exactly on the tie and rounds to even.
    for (double base : { 1.0, 3.0, 1024.0, 0.5, 6.103515625e-05, 65504.0 }) {
        for (double tie : { base * (1 + std::ldexp(1.0, -11)), base * (1 + std::ldexp(1.0, -8)),
                            base * (1 + 3 * std::ldexp(1.0, -11)), base * (1 + 3 * std::ldexp(1.0, -8)) }) {
            for (double eps : { 0.0, std::ldexp(tie, -40), -std::ldexp(tie, -40), std::ldexp(tie, -24),
                                std::ldexp(tie, -25), -std::ldexp(tie, -25) }) {
                v.push_back(tie + eps);
                v.push_back(-(tie + eps));
            }
        }
    }
    const double specials[] = { 0.0,
                                -0.0,
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN(),
                                f64(0x7FF0000000000001ull),
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::min(),
                                static_cast<double>(std::numeric_limits<float>::max()) * 1.0000001,
                                static_cast<double>(std::numeric_limits<float>::denorm_min()) / 2,
                                static_cast<double>(std::numeric_limits<float>::denorm_min()) * 0.75,
                                65520.0,
                                65519.999999,
                                std::ldexp(1.0, -25),
                                std::ldexp(1.0, -25) * (1 + std::ldexp(1.0, -30)) };
    v.insert(v.end(), std::begin(specials), std::end(specials));
    return v;
}

template <typename Out, typename In>
Out convertOne(In value, DType from, DType to)
{
    Out out {};
    const Status s = convertElements(&value, from, &out, to, 1);
    if (!s)
        qFatal("%s", s.error().message.c_str());
    return out;
}

} // namespace

class TestConvert : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void handWorkedFloat16()
    {
        const struct {
            std::uint32_t in;
            std::uint16_t out;
        } cases[] = {
            { 0x3F800000u, 0x3C00u }, // 1.0
            { 0xBF800000u, 0xBC00u }, // -1.0
            { 0x80000000u, 0x8000u }, // -0
            { 0x477FE000u, 0x7BFFu }, // 65504, the largest half
            { 0x477FEFFFu, 0x7BFFu }, // just under the tie to infinity
            { 0x477FF000u, 0x7C00u }, // 65520: tie, 65504 has an odd mantissa → rounds to infinity
            { 0x7F800000u, 0x7C00u }, // inf
            { 0xFF800000u, 0xFC00u }, // -inf
            { 0x33800000u, 0x0001u }, // 2^-24, the smallest subnormal
            { 0x33000000u, 0x0000u }, // 2^-25: tie between 0 and 2^-24 → even (0)
            { 0x33000001u, 0x0001u }, // just above that tie
            { 0x33C00000u, 0x0002u }, // 1.5·2^-24: tie between 1 and 2 units → even (2)
            { 0x38800000u, 0x0400u }, // 2^-14, the smallest normal
            { 0x387FE000u, 0x0400u }, // 0x3FF.F units rounds up into the normal range
            { 0x3F801000u, 0x3C00u }, // 1 + 2^-11: tie → even (1.0)
            { 0x3F803000u, 0x3C02u }, // 1 + 3·2^-11: tie → even (1 + 2^-9)
            { 0x3F801001u, 0x3C01u },
        };
        for (const auto& c : cases)
            QCOMPARE(convertOne<std::uint16_t>(f32(c.in), DType::Float32, DType::Float16), c.out);
        QVERIFY(std::isnan(convertOne<float>(std::uint16_t(0x7E00), DType::Float16, DType::Float32)));
        QCOMPARE(convertOne<std::uint16_t>(std::numeric_limits<float>::quiet_NaN(), DType::Float32, DType::Float16) & 0x7E00u,
                 0x7E00u);
        QCOMPARE(bits32(convertOne<float>(std::uint16_t(0x0001), DType::Float16, DType::Float32)), 0x33800000u);
        QCOMPARE(bits32(convertOne<float>(std::uint16_t(0x83FF), DType::Float16, DType::Float32)), 0xB87FC000u);
    }

    void handWorkedBFloat16()
    {
        const struct {
            std::uint32_t in;
            std::uint16_t out;
        } cases[] = {
            { 0x3F800000u, 0x3F80u }, { 0x3F808000u, 0x3F80u }, // tie → even
            { 0x3F818000u, 0x3F82u },                           // tie → even (up)
            { 0x3F808001u, 0x3F81u }, { 0x3F807FFFu, 0x3F80u }, { 0x7F7FFFFFu, 0x7F80u }, // max float → inf
            { 0x7F7F7FFFu, 0x7F7Fu }, { 0x00000001u, 0x0000u }, // smallest float subnormal → 0
            { 0x00008000u, 0x0000u },                           // tie → even (0)
            { 0x00018000u, 0x0002u }, { 0x80000000u, 0x8000u }, { 0xFF800000u, 0xFF80u },
        };
        for (const auto& c : cases)
            QCOMPARE(convertOne<std::uint16_t>(f32(c.in), DType::Float32, DType::BFloat16), c.out);
        const std::uint16_t nan = convertOne<std::uint16_t>(f32(0x7F800001u), DType::Float32, DType::BFloat16);
        QVERIFY((nan & 0x7F80u) == 0x7F80u && (nan & 0x7Fu)); // a signalling NaN must not become infinity
        // Double rounding through Float32, as c10::BFloat16(double) does: 1 + 2^-8 + 2^-40 rounds to the
        // float 1 + 2^-8, a bf16 tie → even → 1.0 (a direct rounding would give 1 + 2^-7).
        QCOMPARE(convertOne<std::uint16_t>(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40), DType::Float64,
                                           DType::BFloat16),
                 std::uint16_t(0x3F80));
        QCOMPARE(convertOne<std::uint16_t>(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), DType::Float64,
                                           DType::Float16),
                 std::uint16_t(0x3C00));
    }

    void sixteenBitSourcesAgainstATen_data()
    {
        QTest::addColumn<int>("from");
        QTest::addColumn<int>("to");
        const DType types[] = { DType::Float16, DType::BFloat16, DType::Float32, DType::Float64 };
        for (DType from : { DType::Float16, DType::BFloat16 })
            for (DType to : types)
                QTest::newRow(qPrintable(QStringLiteral("%1→%2").arg(QLatin1String(torchName(from).data()),
                                                                    QLatin1String(torchName(to).data()))))
                    << int(from) << int(to);
    }
    void sixteenBitSourcesAgainstATen()
    {
        // Every one of the 65536 bit patterns.
        QFETCH(int, from);
        QFETCH(int, to);
        compareWithATen(bytesOf(all16()), DType(from), DType(to));
    }

    void float32AgainstATen_data()
    {
        QTest::addColumn<int>("to");
        QTest::newRow("float16") << int(DType::Float16);
        QTest::newRow("bfloat16") << int(DType::BFloat16);
        QTest::newRow("float64") << int(DType::Float64);
    }
    void float32AgainstATen()
    {
        QFETCH(int, to);
        compareWithATen(bytesOf(interestingFloats()), DType::Float32, DType(to));
    }

    void float64AgainstATen_data()
    {
        QTest::addColumn<int>("to");
        QTest::newRow("float16") << int(DType::Float16);
        QTest::newRow("bfloat16") << int(DType::BFloat16);
        QTest::newRow("float32") << int(DType::Float32);
    }
    void float64AgainstATen()
    {
        QFETCH(int, to);
        compareWithATen(bytesOf(interestingDoubles()), DType::Float64, DType(to));
    }

    void unalignedBuffers()
    {
        // Mapped checkpoint data can sit at any byte offset.
        std::vector<unsigned char> src(1 + 3 * 4);
        const float values[] = { 1.5f, -2.25f, 65504.0f };
        std::memcpy(src.data() + 1, values, sizeof values);
        std::vector<unsigned char> dst(1 + 3 * 2);
        QVERIFY_RESULT(convertElements(src.data() + 1, DType::Float32, dst.data() + 1, DType::BFloat16, 3));
        std::uint16_t out[3];
        std::memcpy(out, dst.data() + 1, sizeof out);
        QCOMPARE(out[0], std::uint16_t(0x3FC0));
        QCOMPARE(out[1], std::uint16_t(0xC010));
        QCOMPARE(out[2], std::uint16_t(0x4780));
    }

    void sameTypeAndRefusals()
    {
        const std::int64_t ints[] = { 1, -2, std::numeric_limits<std::int64_t>::max() };
        std::int64_t copy[3] = {};
        QVERIFY_RESULT(convertElements(ints, DType::Int64, copy, DType::Int64, 3));
        QCOMPARE(copy[2], ints[2]);
        const bool flags[] = { true, false };
        bool flagsOut[2] = {};
        QVERIFY_RESULT(convertElements(flags, DType::Bool, flagsOut, DType::Bool, 2));
        QCOMPARE(flagsOut[0], true);
        const std::uint16_t nanBits = 0x7D01; // a signalling NaN copies unchanged within its own dtype
        std::uint16_t nanOut = 0;
        QVERIFY_RESULT(convertElements(&nanBits, DType::Float16, &nanOut, DType::Float16, 1));
        QCOMPARE(nanOut, nanBits);

        float f = 0;
        const Status intToFloat = convertElements(ints, DType::Int32, &f, DType::Float32, 1);
        QVERIFY(!intToFloat.ok());
        QVERIFY2(intToFloat.error().message.find("cannot convert int32 to float32") != std::string::npos,
                 intToFloat.error().message.c_str());
        QVERIFY(!convertElements(flags, DType::Bool, &f, DType::Int8, 1).ok());
        QVERIFY(!convertElements(&f, DType::Float32, &f, DType::Float8_e4m3fn, 1).ok());
        QVERIFY(!convertElements(&f, DType::Unknown, &f, DType::Unknown, 1).ok());
        QVERIFY_RESULT(convertElements(nullptr, DType::Float32, nullptr, DType::Float16, 0));
        QVERIFY(canConvert(DType::BFloat16, DType::Float64));
        QVERIFY(!canConvert(DType::Int64, DType::Float64));
    }

    void partialSums()
    {
        std::vector<float> acc(3, 0.0f);
        const std::uint16_t a[] = { 0x3FC0, 0xC010, 0x7F80 }; // bf16 1.5, -2.25, inf
        const std::uint16_t b[] = { 0x3C00, 0x3C00, 0x3C00 }; // f16 1, 1, 1
        const double c[] = { 0.25, 0.25, -1.0 };
        QVERIFY_RESULT(accumulatePartial(acc.data(), a, DType::BFloat16, 3));
        QVERIFY_RESULT(accumulatePartial(acc.data(), b, DType::Float16, 3));
        QVERIFY_RESULT(accumulatePartial(acc.data(), c, DType::Float64, 3));
        QCOMPARE(acc[0], 2.75f);
        QCOMPARE(acc[1], -1.0f);
        QVERIFY(std::isinf(acc[2]));
        std::uint16_t out[3];
        QVERIFY_RESULT(convertElements(acc.data(), DType::Float32, out, DType::BFloat16, 3));
        QCOMPARE(out[0], std::uint16_t(0x4030)); // 2.75
        QCOMPARE(out[1], std::uint16_t(0xBF80));
        QCOMPARE(out[2], std::uint16_t(0x7F80));
        const std::int32_t ints[] = { 1, 2, 3 };
        QVERIFY(!accumulatePartial(acc.data(), ints, DType::Int32, 3).ok());
    }
};

QTEST_GUILESS_MAIN(TestConvert)
#include "tst_convert.moc"
