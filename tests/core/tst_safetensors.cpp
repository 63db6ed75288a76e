// SPDX-License-Identifier: GPL-3.0-or-later
// safetensors reader, writer, HF sharding helpers and byte sizes. The fixture references were written by the real
// safetensors library, so rebuilding their headers byte for byte pins the writer to the reference implementation.
#include "io/byte_size.h"
#include "io/mapped_file.h"
#include "formats/safetensors_reader.h"
#include "formats/safetensors_writer.h"
#include "testutil.h"

#include <QDir>
#include <QTest>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

using namespace tessera;
using tessera::test::fixture;
using tessera::test::fixturesDir;
using tessera::test::makeTempDir;
using tessera::test::readFile;
using tessera::test::writeFile;

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

/// Every safetensors file under the fixtures' reference folders.
QStringList fixtureFiles()
{
    QStringList out;
    const QDir root(q(fixturesDir()));
    for (const QString& caseDir : root.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
        for (const QString& sub : { QStringLiteral("reference"), QStringLiteral("reference_adapter") }) {
            const QDir dir(root.filePath(caseDir + QLatin1Char('/') + sub));
            for (const QString& file : dir.entryList({ QStringLiteral("*.safetensors") }, QDir::Files, QDir::Name))
                out << dir.filePath(file);
        }
    }
    return out;
}

void addFixtureRows()
{
    QTest::addColumn<QString>("path");
    const QStringList files = fixtureFiles();
    QVERIFY2(files.size() >= 7, "the shared fixtures are missing");
    for (const QString& file : files)
        QTest::newRow(qPrintable(QDir(q(fixturesDir())).relativeFilePath(file))) << file;
}

/// A safetensors file from raw JSON: 8-byte length, the JSON, then `dataBytes` bytes 0, 1, 2, …
QByteArray stBytes(const QByteArray& json, int dataBytes)
{
    QByteArray out;
    const std::uint64_t n = static_cast<std::uint64_t>(json.size());
    for (int i = 0; i < 8; ++i)
        out += static_cast<char>((n >> (8 * i)) & 0xFF);
    out += json;
    for (int i = 0; i < dataBytes; ++i)
        out += static_cast<char>(i & 0xFF);
    return out;
}

QByteArray lengthPrefix(std::uint64_t n)
{
    QByteArray out;
    for (int i = 0; i < 8; ++i)
        out += static_cast<char>((n >> (8 * i)) & 0xFF);
    return out;
}

std::string writeTemp(const QByteArray& bytes, const std::string& name = "case.safetensors")
{
    const std::string path = makeTempDir() + "/" + name;
    writeFile(path, bytes.toStdString());
    return path;
}

ByteView viewOf(const std::string& bytes)
{
    auto owner = std::make_shared<std::string>(bytes);
    return ByteView(owner, reinterpret_cast<const std::uint8_t*>(owner->data()), owner->size());
}

/// Fills each tensor with bytes derived from its index and position, so misplaced data is noticed.
Status patternFill(std::size_t index, std::uint8_t* dst, std::uint64_t bytes)
{
    for (std::uint64_t i = 0; i < bytes; ++i)
        dst[i] = static_cast<std::uint8_t>(index * 31 + i * 7);
    return {};
}

std::vector<SafetensorsEntry> entriesOf(const SafetensorsHeader& header)
{
    std::vector<SafetensorsEntry> entries;
    for (const auto& t : header.tensors)
        entries.push_back({ t.name, t.dtype, t.shape });
    return entries;
}

std::string problemsText(const CheckpointInfo& info)
{
    std::string out;
    for (const auto& p : info.problems)
        out += p.text() + "\n";
    return out;
}

} // namespace

class TestSafetensors : public QObject {
    Q_OBJECT

private Q_SLOTS:
    // ---- reading the real library's files -----------------------------------------------------------------
    void readFixture_data() { addFixtureRows(); }
    void readFixture()
    {
        QFETCH(QString, path);
        const auto header = readSafetensorsFile(path.toStdString());
        QVERIFY_RESULT(header);
        QCOMPARE(q(header->path), path);
        QVERIFY(!header->tensors.empty());
        QCOMPARE(q(header->metadata.at("format")), QStringLiteral("pt"));
        QCOMPARE(header->dataStart, header->headerLength + 8);
        QCOMPARE(header->headerLength % 8, 0u);
        // The real writer lists tensors in offset order, each aligned to its element size.
        std::uint64_t expected = header->dataStart;
        for (const auto& t : header->tensors) {
            QCOMPARE(t.begin, expected);
            QCOMPARE((t.begin - header->dataStart) % dtypeSize(t.dtype), 0u);
            expected = t.end;
        }
        QCOMPARE(expected, static_cast<std::uint64_t>(QFileInfo(path).size()));
    }

    void rebuildFixtureHeader_data() { addFixtureRows(); }
    void rebuildFixtureHeader()
    {
        QFETCH(QString, path);
        const auto header = readSafetensorsFile(path.toStdString());
        QVERIFY_RESULT(header);
        auto entries = entriesOf(*header);
        std::reverse(entries.begin(), entries.end()); // the planner must sort, not trust the input order
        const auto layout = planSafetensorsFile(entries, header->metadata);
        QVERIFY_RESULT(layout);

        const std::string file = readFile(path.toStdString());
        QCOMPARE(
            QByteArray::fromStdString(layout->header), QByteArray::fromStdString(file.substr(0, header->dataStart)));
        QCOMPARE(layout->fileSize, static_cast<std::uint64_t>(file.size()));
        for (std::size_t i = 0; i < entries.size(); ++i) {
            const auto& original = header->tensors[header->tensors.size() - 1 - i];
            QCOMPARE(layout->dataOffsets[i], original.begin);
            QCOMPARE(layout->byteSizes[i], original.end - original.begin);
        }
    }

    /// Byte vectors from the reference library's own unit tests (safetensors/src/tensor.rs).
    void referenceLibraryVectors()
    {
        auto emptyLayout = planSafetensorsFile({}, {});
        QVERIFY_RESULT(emptyLayout);
        QCOMPARE(QByteArray::fromStdString(emptyLayout->header), lengthPrefix(8) + QByteArray("{}      "));

        auto withMeta = planSafetensorsFile({}, { { "framework", "pt" } });
        QVERIFY_RESULT(withMeta);
        QCOMPARE(QByteArray::fromStdString(withMeta->header),
            lengthPrefix(40) + QByteArray("{\"__metadata__\":{\"framework\":\"pt\"}}     "));

        auto attn = planSafetensorsFile({ { "attn.0", DType::Float32, { 1, 2, 3 } } }, {});
        QVERIFY_RESULT(attn);
        QCOMPARE(QByteArray::fromStdString(attn->header),
            lengthPrefix(64)
                + QByteArray("{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}"));
        QCOMPARE(attn->fileSize, 8u + 64u + 24u);

        auto aligned = planSafetensorsFile({ { "attn0", DType::Float32, { 1, 1, 2, 3 } } }, {});
        QVERIFY_RESULT(aligned);
        QCOMPARE(QByteArray::fromStdString(aligned->header),
            lengthPrefix(72)
                + QByteArray("{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}       "));
    }

    /// Ties between equally sized dtypes follow the library's enum order (BF16 > F16 > U16 > I16), then names.
    void writerOrder()
    {
        const std::vector<SafetensorsEntry> entries {
            { "a_i16", DType::Int16, { 1 } },
            { "b_bool", DType::Bool, { 3 } },
            { "c_bf16", DType::BFloat16, { 1 } },
            { "d_f16", DType::Float16, { 1 } },
            { "e_u16", DType::UInt16, { 1 } },
            { "f_f64", DType::Float64, { 1 } },
            { "g_i64", DType::Int64, { 1 } },
            { "h_u8", DType::UInt8, { 1 } },
            { "i_i8", DType::Int8, { 1 } },
            { "j_f32", DType::Float32, { 1 } },
            { "k_i32", DType::Int32, { 1 } },
            { "a_f32", DType::Float32, { 2 } },
            { "l_f8", DType::Float8_e4m3fn, { 1 } },
            { "m_c64", DType::Complex64, { 1 } },
        };
        const auto layout = planSafetensorsFile(entries, {});
        QVERIFY_RESULT(layout);
        std::vector<std::size_t> order(entries.size());
        for (std::size_t i = 0; i < order.size(); ++i)
            order[i] = i;
        std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return layout->dataOffsets[a] < layout->dataOffsets[b]; });
        QStringList names;
        for (const auto i : order)
            names << q(entries[i].name);
        QCOMPARE(names.join(QLatin1Char(' ')),
            QStringLiteral("g_i64 f_f64 m_c64 a_f32 j_f32 k_i32 c_bf16 d_f16 e_u16 a_i16 l_f8 i_i8 h_u8 b_bool"));
        for (std::size_t i = 0; i < entries.size(); ++i)
            QCOMPARE((layout->dataOffsets[i]) % dtypeSize(entries[i].dtype), 0u);
    }

    // ---- writing ------------------------------------------------------------------------------------------
    void writeAndReadBack()
    {
        const std::vector<SafetensorsEntry> entries {
            { "model.norm.weight", DType::BFloat16, { 5 } },
            { "lm_head.weight", DType::Float32, { 3, 7 } },
            { "scalar", DType::Float64, {} },
            { "empty", DType::Float32, { 0, 4 } },
            { "mask", DType::Bool, { 2, 3 } },
            { "ids", DType::Int64, { 4 } },
            { "fp8", DType::Float8_e5m2, { 9 } },
        };
        const std::map<std::string, std::string> metadata { { "format", "pt" }, { "producer", "tessera" } };
        const std::string path = makeTempDir() + "/model.safetensors";
        QVERIFY_RESULT(writeSafetensorsFile(path, entries, metadata, patternFill));

        const auto header = readSafetensorsFile(path);
        QVERIFY_RESULT(header);
        QCOMPARE(header->metadata, metadata);
        QCOMPARE(header->tensors.size(), entries.size());
        const auto layout = planSafetensorsFile(entries, metadata);
        QVERIFY_RESULT(layout);
        const std::string bytes = readFile(path);
        QCOMPARE(static_cast<std::uint64_t>(bytes.size()), layout->fileSize);
        QCOMPARE(
            QByteArray::fromStdString(bytes.substr(0, header->dataStart)), QByteArray::fromStdString(layout->header));
        for (std::size_t i = 0; i < entries.size(); ++i) {
            const auto it = std::find_if(header->tensors.begin(), header->tensors.end(),
                [&](const SafetensorsTensor& t) { return t.name == entries[i].name; });
            QVERIFY(it != header->tensors.end());
            QCOMPARE(it->dtype, entries[i].dtype);
            QCOMPARE(it->shape, entries[i].shape);
            QCOMPARE(it->begin, layout->dataOffsets[i]);
            QCOMPARE(it->end - it->begin, layout->byteSizes[i]);
            std::string expected(layout->byteSizes[i], '\0');
            QVERIFY(patternFill(i, reinterpret_cast<std::uint8_t*>(expected.data()), expected.size()).ok());
            QVERIFY(bytes.compare(it->begin, expected.size(), expected) == 0);
        }
        // No temporary file is left behind.
        QCOMPARE(QDir(QFileInfo(q(path)).path()).entryList(QDir::Files).size(), 1);
    }

    void writeFailsCleanly()
    {
        const std::string dir = makeTempDir();
        const std::string path = dir + "/model.safetensors";
        const Status status = writeSafetensorsFile(path, { { "w", DType::Float32, { 4 } } }, {},
            [](std::size_t, std::uint8_t*, std::uint64_t) -> Status { return makeError("source shard unreadable"); });
        QVERIFY(!status.ok());
        QVERIFY2(status.error().message.rfind(path + ": tensor 'w'", 0) == 0, status.error().message.c_str());
        QVERIFY(status.error().message.find("source shard unreadable") != std::string::npos);
        QVERIFY(QDir(q(dir)).entryList(QDir::Files).isEmpty());
    }

    void escapedNames()
    {
        const std::vector<SafetensorsEntry> entries {
            { "quote\"back\\slash", DType::UInt8, { 1 } },
            { "ctl\n\t\x01\x7f", DType::UInt8, { 1 } },
            { "caf\xc3\xa9", DType::UInt8, { 1 } },
        };
        const auto layout = planSafetensorsFile(entries, {});
        QVERIFY_RESULT(layout);
        // serde_json: short escapes, \u00XX in lowercase for other controls, DEL and UTF-8 copied as they are.
        const std::string json = layout->header.substr(8);
        QVERIFY(json.find("\"caf\xc3\xa9\":") != std::string::npos);
        QVERIFY(json.find("\"ctl\\n\\t\\u0001\x7f\":") != std::string::npos);
        QVERIFY(json.find("\"quote\\\"back\\\\slash\":") != std::string::npos);

        const std::string path = makeTempDir() + "/names.safetensors";
        QVERIFY_RESULT(writeSafetensorsFile(path, entries, {}, patternFill));
        const auto header = readSafetensorsFile(path);
        QVERIFY_RESULT(header);
        std::set<std::string> names;
        for (const auto& t : header->tensors)
            names.insert(t.name);
        for (const auto& e : entries)
            QVERIFY(names.count(e.name));
    }

    void writerErrors_data()
    {
        QTest::addColumn<QString>("expected");
        QTest::addColumn<int>("which");
        QTest::newRow("duplicate name") << QStringLiteral("appears twice") << 0;
        QTest::newRow("complex128") << QStringLiteral("cannot store dtype complex128") << 1;
        QTest::newRow("unknown dtype") << QStringLiteral("cannot store dtype") << 2;
        QTest::newRow("negative dim") << QStringLiteral("negative dimension") << 3;
        QTest::newRow("reserved name") << QStringLiteral("__metadata__") << 4;
        QTest::newRow("invalid utf-8 name") << QStringLiteral("UTF-8") << 5;
        QTest::newRow("quantized") << QStringLiteral("cannot store dtype qint8") << 6;
        QTest::newRow("overflow") << QStringLiteral("too large") << 7;
    }
    void writerErrors()
    {
        QFETCH(QString, expected);
        QFETCH(int, which);
        const std::vector<std::vector<SafetensorsEntry>> cases {
            { { "a", DType::Float32, { 1 } }, { "a", DType::BFloat16, { 2 } } },
            { { "a", DType::Complex128, { 1 } } },
            { { "a", DType::Unknown, { 1 } } },
            { { "a", DType::Float32, { 2, -1 } } },
            { { "__metadata__", DType::Float32, { 1 } } },
            { { "bad\xff", DType::Float32, { 1 } } },
            { { "a", DType::QInt8, { 1 } } },
            { { "a", DType::Float32, { 1LL << 40, 1LL << 40 } } },
        };
        const auto layout = planSafetensorsFile(cases[static_cast<std::size_t>(which)], {});
        QVERIFY(!layout.ok());
        QVERIFY2(q(layout.error().message).contains(expected), layout.error().message.c_str());
    }

    // ---- validation ---------------------------------------------------------------------------------------
    void validationErrors_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("expected");
        const QByteArray u8a = "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}";
        QTest::newRow("empty file") << QByteArray() << QStringLiteral("empty");
        QTest::newRow("shorter than 8 bytes") << QByteArray("{}\0\0", 4) << QStringLiteral("too short");
        QTest::newRow("header too large")
            << lengthPrefix(100000001) + QByteArray(64, ' ') << QStringLiteral("more than the 100,000,000");
        QTest::newRow("header past end of file")
            << lengthPrefix(1000) + QByteArray("{}      ") << QStringLiteral("only 8 bytes after");
        QTest::newRow("huge header length")
            << lengthPrefix(~0ULL) + QByteArray("{}") << QStringLiteral("header length");
        QTest::newRow("invalid utf-8") << stBytes("{\"\xff\":{}}", 0) << QStringLiteral("not valid UTF-8");
        QTest::newRow("bad json") << stBytes("{\"a\":", 0) << QStringLiteral("not valid JSON");
        QTest::newRow("empty header") << stBytes("", 0) << QStringLiteral("not valid JSON");
        QTest::newRow("trailing json garbage") << stBytes("{} x", 0) << QStringLiteral("not valid JSON");
        QTest::newRow("not an object") << stBytes("[1,2]", 0) << QStringLiteral("must be a JSON object");
        QTest::newRow("entry not an object")
            << stBytes("{\"a\":3}", 0) << QStringLiteral("tensor 'a' must be an object");
        QTest::newRow("gap") << stBytes("{" + u8a + ",\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
            12) << QStringLiteral("gap of 4 bytes between tensor 'a' [0, 4) and tensor 'b' [8, 12)");
        QTest::newRow("first not at 0") << stBytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8)
                                        << QStringLiteral("instead of 0");
        QTest::newRow("overlap") << stBytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                                            "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
            12) << QStringLiteral("tensor 'b' claims bytes [4, 12), which overlap tensor 'a' [0, 8)");
        QTest::newRow("end before begin")
            << stBytes("{" + u8a + ",\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,2]}}", 4)
            << QStringLiteral("end lies before its begin");
        QTest::newRow("trailing bytes") << stBytes("{" + u8a + "}", 6)
                                        << QStringLiteral("2 unexpected bytes after the last tensor");
        QTest::newRow("zero beside huge dimensions")
            << stBytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[0,4294967296,4294967296],\"data_offsets\":[0,0]}}", 0)
            << QStringLiteral("dimension 4294967296 is too large");
        QTest::newRow("truncated data") << stBytes("{" + u8a + "}", 2) << QStringLiteral("truncated");
        QTest::newRow("wrong size") << stBytes("{\"x\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,100]}}",
            100) << QStringLiteral("tensor 'x' claims bytes [0, 100) but its shape [3,4] of F32 needs 48 bytes");
        QTest::newRow("unknown dtype") << stBytes("{\"a\":{\"dtype\":\"F99\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4)
                                       << QStringLiteral("unknown dtype \"F99\"");
        QTest::newRow("sub-byte dtype") << stBytes("{\"a\":{\"dtype\":\"F4\",\"shape\":[8],\"data_offsets\":[0,4]}}", 4)
                                        << QStringLiteral("cannot handle");
        QTest::newRow("dtype not a string") << stBytes("{\"a\":{\"dtype\":5,\"shape\":[4],\"data_offsets\":[0,4]}}", 4)
                                            << QStringLiteral("dtype must be a string");
        QTest::newRow("duplicate tensor")
            << stBytes("{" + u8a + "," + u8a + "}", 4) << QStringLiteral("the key 'a' appears twice");
        QTest::newRow("duplicate field") << stBytes(
            "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4)
                                         << QStringLiteral("the field 'dtype' appears twice");
        QTest::newRow("duplicate metadata key")
            << stBytes("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0) << QStringLiteral("key 'k' twice");
        QTest::newRow("metadata value not a string")
            << stBytes("{\"__metadata__\":{\"k\":1}}", 0) << QStringLiteral("must be a string");
        QTest::newRow("metadata not an object")
            << stBytes("{\"__metadata__\":[\"k\"]}", 0) << QStringLiteral("__metadata__ must be an object");
        QTest::newRow("missing data_offsets")
            << stBytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[4]}}", 4) << QStringLiteral("no data_offsets");
        QTest::newRow("missing shape") << stBytes("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,4]}}", 4)
                                       << QStringLiteral("no shape");
        QTest::newRow("missing dtype") << stBytes("{\"a\":{\"shape\":[4],\"data_offsets\":[0,4]}}", 4)
                                       << QStringLiteral("no dtype");
        QTest::newRow("negative dim") << stBytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[-4],\"data_offsets\":[0,4]}}", 4)
                                      << QStringLiteral("contains a negative number");
        QTest::newRow("fractional dim") << stBytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,4]}}",
            4) << QStringLiteral("not a whole number");
        QTest::newRow("three offsets") << stBytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,4]}}",
            4) << QStringLiteral("two numbers");
        QTest::newRow("one offset") << stBytes("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0]}}", 4)
                                    << QStringLiteral("two numbers");
        QTest::newRow("size overflow") << stBytes(
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4)
                                       << QStringLiteral("does not fit in 64 bits");
        QTest::newRow("nested garbage") << stBytes(QByteArray(2000, '['), 0) << QStringLiteral("must be a JSON object");
    }
    void validationErrors()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, expected);
        const std::string path = writeTemp(bytes);
        const auto header = readSafetensorsFile(path);
        QVERIFY(!header.ok());
        const QString message = q(header.error().message);
        QVERIFY2(message.startsWith(q(path) + QStringLiteral(": ")), qPrintable(message));
        QVERIFY2(message.contains(expected), qPrintable(message));

        // The same from memory, under any name.
        const auto fromMemory = readSafetensorsHeader(viewOf(bytes.toStdString()), "mem.safetensors");
        QVERIFY(!fromMemory.ok());
        QVERIFY(fromMemory.error().message.rfind("mem.safetensors: ", 0) == 0);
    }

    /// Inputs the reference accepts and so must we.
    void acceptedVariants_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<int>("tensors");
        QTest::newRow("no tensors") << stBytes("{}", 0) << 0;
        QTest::newRow("metadata null") << stBytes("{\"__metadata__\":null}", 0) << 0;
        QTest::newRow("whitespace and padding")
            << stBytes(" \n{ \"a\" : {\"dtype\":\"U8\",\"shape\":[ 4 ],\"data_offsets\":[0,4]} }  \t ", 4) << 1;
        QTest::newRow("unknown field ignored") << stBytes("{\"a\":{\"dtype\":\"U8\",\"extra\":{\"x\":[1,{\"y\":null}]},"
                                                          "\"shape\":[4],\"more\":true,\"data_offsets\":[0,4]}}",
            4) << 1;
        QTest::newRow("unsorted entries") << stBytes("{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
                                                     "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
            6) << 2;
        QTest::newRow("zero-size and scalar") << stBytes(
            "{\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[0,0]},\"s\":{\"dtype\":\"F64\",\"shape\":[],"
            "\"data_offsets\":[0,8]}}",
            8) << 2;
    }
    void acceptedVariants()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(int, tensors);
        const auto header = readSafetensorsHeader(viewOf(bytes.toStdString()), "mem");
        QVERIFY_RESULT(header);
        QCOMPARE(static_cast<int>(header->tensors.size()), tensors);
    }

    void headerOrderAndAbsoluteOffsets()
    {
        const QByteArray bytes = stBytes("{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},\"a\":{"
                                         "\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
            6);
        const auto header = readSafetensorsHeader(viewOf(bytes.toStdString()), "mem");
        QVERIFY_RESULT(header);
        QCOMPARE(q(header->tensors[0].name), QStringLiteral("b"));
        const std::uint64_t start = 8 + static_cast<std::uint64_t>(bytes.size() - 6 - 8);
        QCOMPARE(header->dataStart, start);
        QCOMPARE(header->tensors[0].begin, start + 4);
        QCOMPARE(header->tensors[0].end, start + 6);
        QCOMPARE(header->tensors[1].begin, start);
    }

    /// Every prefix of a valid file is rejected with a message naming the file.
    void everyTruncationFails()
    {
        const std::string path = makeTempDir() + "/small.safetensors";
        QVERIFY_RESULT(writeSafetensorsFile(path, { { "a", DType::Float32, { 2 } }, { "b", DType::BFloat16, { 3 } } },
            { { "format", "pt" } }, patternFill));
        const std::string bytes = readFile(path);
        QVERIFY_RESULT(readSafetensorsHeader(viewOf(bytes), path));
        for (std::size_t n = 0; n < bytes.size(); ++n) {
            const auto header = readSafetensorsHeader(viewOf(bytes.substr(0, n)), path);
            QVERIFY2(!header.ok(), qPrintable(QString::number(n)));
            QVERIFY(header.error().message.rfind(path + ": ", 0) == 0);
        }
    }

    /// Flipping any header byte of a real file never crashes; failures still name the file.
    void flippedBytes_data() { addFixtureRows(); }
    void flippedBytes()
    {
        QFETCH(QString, path);
        const std::string original = readFile(path.toStdString());
        const auto header = readSafetensorsHeader(viewOf(original), "x");
        QVERIFY_RESULT(header);
        const std::size_t end = static_cast<std::size_t>(std::min<std::uint64_t>(header->dataStart, 1024));
        // Flip in place and view without copying: thousands of variants of a 1 MB file stay cheap.
        std::string bytes = original;
        auto* data = reinterpret_cast<std::uint8_t*>(bytes.data());
        const ByteView view(nullptr, data, bytes.size());
        int failures = 0;
        for (std::size_t i = 0; i < end; ++i) {
            for (const std::uint8_t mask : { 0x01, 0x20, 0x80, 0xFF }) {
                data[i] ^= mask;
                const auto flipped = readSafetensorsHeader(view, "x");
                data[i] ^= mask;
                if (!flipped.ok()) {
                    ++failures;
                    QVERIFY(flipped.error().message.rfind("x: ", 0) == 0);
                }
            }
        }
        QVERIFY(failures > 0);
    }

    // ---- Hugging Face folders ----------------------------------------------------------------------------
    void scanReferenceFolder()
    {
        const std::string dir = fixture("fsdp2_llama_w4/reference");
        const auto info = scanSafetensorsFolder(dir);
        QVERIFY_RESULT(info);
        QCOMPARE(q(info->layout), QStringLiteral("hf-safetensors"));
        QCOMPARE(info->parallel.worldSize, 1);
        QVERIFY(info->problems.empty());
        QCOMPARE(info->files.size(), 1u);
        QVERIFY(QFileInfo(q(info->files[0])).isAbsolute());
        QCOMPARE(QFileInfo(q(info->files[0])).canonicalFilePath(),
            QFileInfo(q(dir + "/model.safetensors")).canonicalFilePath());
        QCOMPARE(QFileInfo(q(info->hfConfigDir)).canonicalFilePath(), QFileInfo(q(dir)).canonicalFilePath());
        QCOMPARE(q(info->notes.at("metadata.format")), QStringLiteral("pt"));

        const auto header = readSafetensorsFile(dir + "/model.safetensors");
        QVERIFY_RESULT(header);
        QCOMPARE(info->tensors.size(), header->tensors.size());
        QCOMPARE(info->totalBytes(), header->tensors.back().end - header->dataStart);
        std::uint64_t previous = 0;
        for (const auto& t : info->tensors) {
            QCOMPARE(t.pieces.size(), 1u);
            const Piece& p = t.pieces[0];
            QVERIFY(p.dataOffset >= previous);
            previous = p.dataOffset;
            QCOMPARE(p.file, info->files[0]);
            QCOMPARE(p.rank, -1);
            QCOMPARE(p.shape, t.shape);
            QCOMPARE(p.offsets, Shape(t.shape.size(), 0));
            QCOMPARE(p.storedDtype, t.dtype);
            QCOMPARE(p.storageBegin, p.dataOffset);
            QCOMPARE(p.storageBytes, t.nbytes());
            QCOMPARE(p.strides.size(), t.shape.size());
            if (t.shape.size() == 2) {
                QCOMPARE(p.strides[0], t.shape[1]);
                QCOMPARE(p.strides[1], 1);
            }
        }
        // The same file given directly.
        const auto direct = scanSafetensorsFolder(dir + "/model.safetensors");
        QVERIFY_RESULT(direct);
        QCOMPARE(direct->tensors.size(), info->tensors.size());
    }

    void shardedRoundTrip()
    {
        const std::string dir = makeTempDir();
        const std::string source = fixture("fsdp2_qwen2_w2_fp32/reference/model.safetensors");
        const auto written = writeShards(source, dir, 200000);
        QVERIFY(written > 2);

        const auto info = scanSafetensorsFolder(dir);
        QVERIFY_RESULT(info);
        QVERIFY2(info->problems.empty(), problemsText(*info).c_str());
        QCOMPARE(info->files.size(), written);
        QVERIFY(info->hfConfigDir.empty());

        const auto original = readSafetensorsFile(source);
        QVERIFY_RESULT(original);
        QCOMPARE(info->tensors.size(), original->tensors.size());
        QCOMPARE(q(info->notes.at("index_total_size")), QString::number(info->totalBytes()));
        const std::string sourceBytes = readFile(source);
        for (const auto& t : original->tensors) {
            const TensorInfo* found = info->find(t.name);
            QVERIFY(found);
            QCOMPARE(found->shape, t.shape);
            const Piece& p = found->pieces[0];
            const std::string shard = readFile(p.file);
            QVERIFY(shard.compare(p.dataOffset, p.storageBytes, sourceBytes, t.begin, t.end - t.begin) == 0);
        }
        // The index file itself may also be given.
        const auto viaIndex = scanSafetensorsFolder(dir + "/model.safetensors.index.json");
        QVERIFY_RESULT(viaIndex);
        QCOMPARE(viaIndex->tensors.size(), info->tensors.size());
    }

    void shardedProblems()
    {
        const std::string dir = makeTempDir();
        const std::string source = fixture("fsdp2_qwen2_w2_fp32/reference/model.safetensors");
        QVERIFY(writeShards(source, dir, 200000) > 2);
        const std::string indexPath = dir + "/model.safetensors.index.json";
        std::string index = readFile(indexPath);

        // The shard holding model.norm.weight, before the index is edited.
        const std::string normKey = "    \"model.norm.weight\": \"";
        const auto normPos = index.find(normKey);
        QVERIFY(normPos != std::string::npos);
        const std::string normShard = index.substr(
            normPos + normKey.size(), index.find('"', normPos + normKey.size()) - normPos - normKey.size());

        // Misplace one tensor, drop another from the map and list one that exists nowhere.
        auto replaceOnce = [&index](const std::string& from, const std::string& to) {
            const auto pos = index.find(from);
            QVERIFY(pos != std::string::npos);
            index.replace(pos, from.size(), to);
        };
        replaceOnce(
            "\"model.embed_tokens.weight\": \"model-00002-of-", "\"model.embed_tokens.weight\": \"model-00003-of-");
        replaceOnce(normKey, "    \"model.ghost.weight\": \"");
        writeFile(indexPath, index);
        // And remove a shard none of these involve.
        std::string removed;
        for (const QString& file :
            QDir(q(dir)).entryList({ QStringLiteral("model-*.safetensors") }, QDir::Files, QDir::Name)) {
            const std::string name = file.toStdString();
            if (name.rfind("model-00002-", 0) != 0 && name.rfind("model-00003-", 0) != 0 && name != normShard)
                removed = name;
        }
        QVERIFY(!removed.empty());
        QVERIFY(std::filesystem::remove(dir + "/" + removed));
        // A stray shard the index does not mention.
        QVERIFY(std::filesystem::copy_file(dir + "/" + normShard, dir + "/model-stray.safetensors"));

        const auto info = scanSafetensorsFolder(dir);
        QVERIFY_RESULT(info);
        const std::string text = problemsText(*info);
        QVERIFY2(text.find("model-00002-of-00006.safetensors: model.embed_tokens.weight: model.safetensors.index.json "
                           "says it is in model-00003-of-00006.safetensors")
                != std::string::npos,
            text.c_str());
        QVERIFY2(text.find("model-stray.safetensors: not listed in model.safetensors.index.json") != std::string::npos,
            text.c_str());
        QVERIFY2(text.find(removed + ": listed in model.safetensors.index.json for ") != std::string::npos
                && text.find("but the file does not exist") != std::string::npos,
            text.c_str());
        QVERIFY2(text.find(normShard
                     + ": model.ghost.weight: is listed in model.safetensors.index.json for this file, "
                       "but the file does not contain it")
                != std::string::npos,
            text.c_str());
        QVERIFY2(
            text.find(normShard + ": model.norm.weight: is in this file but not listed in model.safetensors.index.json")
                != std::string::npos,
            text.c_str());
        QCOMPARE(info->problems.size(), 5u);
        for (const auto& p : info->problems)
            QVERIFY2(p.file.rfind(dir, 0) == 0, p.text().c_str());
    }

    void folderErrors()
    {
        const std::string empty = makeTempDir();
        auto info = scanSafetensorsFolder(empty);
        QVERIFY(!info.ok());
        QVERIFY(q(info.error().message).contains(QStringLiteral("no .safetensors file")));

        QVERIFY_RESULT(
            writeSafetensorsFile(empty + "/a.safetensors", { { "x", DType::UInt8, { 1 } } }, {}, patternFill));
        info = scanSafetensorsFolder(empty);
        QVERIFY_RESULT(info); // exactly one file: fine
        QCOMPARE(info->tensors.size(), 1u);

        QVERIFY_RESULT(
            writeSafetensorsFile(empty + "/b.safetensors", { { "y", DType::UInt8, { 1 } } }, {}, patternFill));
        info = scanSafetensorsFolder(empty);
        QVERIFY(!info.ok());
        QVERIFY(q(info.error().message).contains(QStringLiteral("no model.safetensors.index.json")));

        info = scanSafetensorsFolder(empty + "/missing");
        QVERIFY(!info.ok());

        writeFile(empty + "/model.safetensors.index.json", "{\"weight_map\": [");
        info = scanSafetensorsFolder(empty);
        QVERIFY(!info.ok());
        QVERIFY(q(info.error().message).contains(QStringLiteral("not valid JSON")));
    }

    // ---- sharding helpers --------------------------------------------------------------------------------
    void splitIntoShards_data()
    {
        QTest::addColumn<QList<quint64>>("sizes");
        QTest::addColumn<quint64>("max");
        QTest::addColumn<QString>("expected");
        // huggingface_hub tests/test_serialization.py: DUMMY_STATE_DICT = 6, 10, 30, 2, 2.
        const QList<quint64> dummy { 6, 10, 30, 2, 2 };
        QTest::newRow("hf single shard") << dummy << quint64(100) << QStringLiteral("0 1 2 3 4");
        QTest::newRow("hf multiple shards") << dummy << quint64(10) << QStringLiteral("0|2|1|3 4");
        QTest::newRow("exact fit") << QList<quint64> { 5, 5, 5 } << quint64(10) << QStringLiteral("0 1|2");
        QTest::newRow("empty") << QList<quint64> {} << quint64(10) << QString();
        QTest::newRow("all oversize") << QList<quint64> { 11, 12 } << quint64(10) << QStringLiteral("0|1");
        QTest::newRow("zero sizes") << QList<quint64> { 0, 0, 10, 0 } << quint64(10) << QStringLiteral("0 1 2 3");
    }
    void splitIntoShards()
    {
        QFETCH(QList<quint64>, sizes);
        QFETCH(quint64, max);
        QFETCH(QString, expected);
        const std::vector<std::uint64_t> input(sizes.begin(), sizes.end());
        QStringList shards;
        for (const auto& shard : tessera::splitIntoShards(input, max)) {
            QStringList members;
            for (const auto i : shard)
                members << QString::number(i);
            shards << members.join(QLatin1Char(' '));
        }
        QCOMPARE(shards.join(QLatin1Char('|')), expected);
    }

    void shardNames()
    {
        QCOMPARE(q(shardFileName(0, 3)), QStringLiteral("model-00001-of-00003.safetensors"));
        QCOMPARE(q(shardFileName(2, 3)), QStringLiteral("model-00003-of-00003.safetensors"));
        QCOMPARE(q(shardFileName(99999, 100000)), QStringLiteral("model-100000-of-100000.safetensors"));
        QCOMPARE(q(shardFileName(0, 1)), QStringLiteral("model.safetensors"));
    }

    void indexJson()
    {
        const std::string json = makeShardIndexJson(1234,
            { { "model.b", "model-00002-of-00002.safetensors" }, { "model.a", "model-00001-of-00002.safetensors" },
                { "caf\xc3\xa9\"\n\x7f\xf0\x9f\x98\x80", "model-00001-of-00002.safetensors" } });
        // Python: json.dumps(index, indent=2, sort_keys=True) + "\n"
        const std::string expected
            = "{\n"
              "  \"metadata\": {\n"
              "    \"total_size\": 1234\n"
              "  },\n"
              "  \"weight_map\": {\n"
              "    \"caf\\u00e9\\\"\\n\\u007f\\ud83d\\ude00\": \"model-00001-of-00002.safetensors\",\n"
              "    \"model.a\": \"model-00001-of-00002.safetensors\",\n"
              "    \"model.b\": \"model-00002-of-00002.safetensors\"\n"
              "  }\n"
              "}\n";
        QCOMPARE(q(json), q(expected));
        QCOMPARE(q(makeShardIndexJson(0, {})),
            QStringLiteral("{\n  \"metadata\": {\n    \"total_size\": 0\n  },\n  \"weight_map\": {}\n}\n"));
    }

    // ---- byte sizes --------------------------------------------------------------------------------------
    void parseByteSize_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<quint64>("bytes");
        QTest::newRow("5GB") << QStringLiteral("5GB") << quint64(5000000000ULL);
        QTest::newRow("500MB") << QStringLiteral("500MB") << quint64(500000000ULL);
        QTest::newRow("2GiB") << QStringLiteral("2GiB") << quint64(2ULL << 30);
        QTest::newRow("100KB") << QStringLiteral("100KB") << quint64(100000);
        QTest::newRow("1KiB") << QStringLiteral("1KiB") << quint64(1024);
        QTest::newRow("bytes") << QStringLiteral("123") << quint64(123);
        QTest::newRow("B suffix") << QStringLiteral("123B") << quint64(123);
        QTest::newRow("1.5GB") << QStringLiteral("1.5GB") << quint64(1500000000ULL);
        QTest::newRow("lower case") << QStringLiteral("5gb") << quint64(5000000000ULL);
        QTest::newRow("mixed case") << QStringLiteral("2gIb") << quint64(2ULL << 30);
        QTest::newRow("spaces") << QStringLiteral("  10 GB ") << quint64(10000000000ULL);
        QTest::newRow("50GB") << QStringLiteral("50GB") << quint64(50000000000ULL);
        QTest::newRow("1TB") << QStringLiteral("1TB") << quint64(1000000000000ULL);
        QTest::newRow("0.5MiB") << QStringLiteral("0.5MiB") << quint64(524288);
        QTest::newRow("fraction rounds down") << QStringLiteral("0.1KiB") << quint64(102);
        QTest::newRow("1.1GB exact") << QStringLiteral("1.1GB") << quint64(1100000000ULL);
        QTest::newRow("max") << QStringLiteral("18446744073709551615") << quint64(18446744073709551615ULL);
        QTest::newRow("zero") << QStringLiteral("0") << quint64(0);
    }
    void parseByteSize()
    {
        QFETCH(QString, text);
        QFETCH(quint64, bytes);
        const auto parsed = tessera::parseByteSize(text.toStdString());
        QVERIFY_RESULT(parsed);
        QCOMPARE(quint64(*parsed), bytes);
    }

    void parseByteSizeErrors_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("empty") << QString() << QStringLiteral("empty");
        QTest::newRow("no number") << QStringLiteral("GB") << QStringLiteral("start with a number");
        QTest::newRow("unknown unit") << QStringLiteral("5XB") << QStringLiteral("unknown unit \"XB\"");
        QTest::newRow("bare G") << QStringLiteral("5G") << QStringLiteral("5GB");
        QTest::newRow("negative") << QStringLiteral("-5GB") << QStringLiteral("start with a number");
        QTest::newRow("too large") << QStringLiteral("18446744073709551616") << QStringLiteral("too large");
        QTest::newRow("overflow by unit") << QStringLiteral("20000000TB") << QStringLiteral("2^64");
        QTest::newRow("two numbers") << QStringLiteral("5 5GB") << QStringLiteral("unknown unit");
    }
    void parseByteSizeErrors()
    {
        QFETCH(QString, text);
        QFETCH(QString, expected);
        const auto parsed = tessera::parseByteSize(text.toStdString());
        QVERIFY(!parsed.ok());
        QVERIFY2(q(parsed.error().message).contains(expected), parsed.error().message.c_str());
        QVERIFY(q(parsed.error().message).contains(text));
    }

    void formatBytes_data()
    {
        QTest::addColumn<quint64>("bytes");
        QTest::addColumn<QString>("expected");
        QTest::newRow("0") << quint64(0) << QStringLiteral("0 B");
        QTest::newRow("512") << quint64(512) << QStringLiteral("512 B");
        QTest::newRow("999") << quint64(999) << QStringLiteral("999 B");
        QTest::newRow("1000") << quint64(1000) << QStringLiteral("1.00 KB");
        QTest::newRow("1.23 GB") << quint64(1234567890) << QStringLiteral("1.23 GB");
        QTest::newRow("45.6 MB") << quint64(45600000) << QStringLiteral("45.6 MB");
        QTest::newRow("123 GB") << quint64(123000000000ULL) << QStringLiteral("123 GB");
        QTest::newRow("no 1000 KB") << quint64(999999) << QStringLiteral("1.00 MB");
        QTest::newRow("max") << quint64(~0ULL) << QStringLiteral("18.4 EB");
    }
    void formatBytes()
    {
        QFETCH(quint64, bytes);
        QFETCH(QString, expected);
        QCOMPARE(q(tessera::formatBytes(bytes)), expected);
    }

private:
    /// Splits `source` into HF shards in `dir` with the writer and the index helper; returns the shard count.
    std::size_t writeShards(const std::string& source, const std::string& dir, std::uint64_t maxShardSize)
    {
        const auto header = readSafetensorsFile(source);
        if (!header)
            return 0;
        const std::string bytes = readFile(source);
        std::vector<std::uint64_t> sizes;
        std::uint64_t total = 0;
        for (const auto& t : header->tensors) {
            sizes.push_back(t.end - t.begin);
            total += t.end - t.begin;
        }
        const auto shards = tessera::splitIntoShards(sizes, maxShardSize);
        std::vector<std::pair<std::string, std::string>> weightMap;
        for (std::size_t s = 0; s < shards.size(); ++s) {
            const std::string name = shardFileName(s, shards.size());
            std::vector<SafetensorsEntry> entries;
            std::vector<const SafetensorsTensor*> tensors;
            for (const auto i : shards[s]) {
                const auto& t = header->tensors[i];
                entries.push_back({ t.name, t.dtype, t.shape });
                tensors.push_back(&t);
                weightMap.emplace_back(t.name, name);
            }
            const Status status = writeSafetensorsFile(dir + "/" + name, entries, header->metadata,
                [&](std::size_t index, std::uint8_t* dst, std::uint64_t n) -> Status {
                    std::memcpy(dst, bytes.data() + tensors[index]->begin, n);
                    return {};
                });
            if (!status)
                return 0;
        }
        writeFile(dir + "/model.safetensors.index.json", makeShardIndexJson(total, weightMap));
        return shards.size();
    }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "tst_safetensors.moc"
