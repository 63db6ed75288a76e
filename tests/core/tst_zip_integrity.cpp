// SPDX-License-Identifier: GPL-3.0-or-later
// Damaged torch.save archives are refused, never merged into silently wrong output: every record read is checked
// to be stored uncompressed and to match its CRC-32 (tensor data while a merge, test or diff streams it).

#include "testutil.h"

#include "io/crc32.h"
#include "text_util.h"

#include <filesystem>
#include <string>

using namespace tessera;
namespace fs = std::filesystem;

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

std::uint32_t le(const std::string& bytes, std::size_t at, int width)
{
    std::uint32_t v = 0;
    for (int i = 0; i < width; ++i)
        v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)])) << (8 * i);
    return v;
}

/// Where a record sits in a ZIP archive, found by its headers' signatures (enough for the fixtures' archives).
struct RecordAt {
    std::size_t local = std::string::npos;   ///< local header
    std::size_t central = std::string::npos; ///< central directory header
    std::size_t payload = 0;
    std::size_t size = 0;
};

/// The first record whose name ends with `suffix` (e.g. "/data/0", "/data.pkl").
RecordAt findRecord(const std::string& bytes, const std::string& suffix)
{
    RecordAt r;
    for (std::size_t at = bytes.find("PK\x03\x04"); at != std::string::npos; at = bytes.find("PK\x03\x04", at + 4)) {
        const std::size_t nameLen = le(bytes, at + 26, 2);
        if (endsWith(bytes.substr(at + 30, nameLen), suffix)) {
            r.local = at;
            r.payload = at + 30 + nameLen + le(bytes, at + 28, 2);
            break;
        }
    }
    if (r.local == std::string::npos)
        return r;
    for (std::size_t at = bytes.find("PK\x01\x02"); at != std::string::npos; at = bytes.find("PK\x01\x02", at + 4)) {
        const std::size_t nameLen = le(bytes, at + 28, 2);
        // The first one after the local header: in a DCP file each item is an archive with its own "data/0".
        if (at > r.local && endsWith(bytes.substr(at + 46, nameLen), suffix)) {
            r.central = at;
            r.size = le(bytes, at + 24, 4);
            break;
        }
    }
    return r;
}

/// A writable copy of a fixture folder.
std::string copyFixture(const std::string& relative)
{
    const std::string dir = test::makeTempDir() + "/copy";
    fs::copy(test::fixture(relative), dir, fs::copy_options::recursive);
    for (const auto& entry : fs::recursive_directory_iterator(dir))
        fs::permissions(entry.path(), fs::perms::owner_write, fs::perm_options::add);
    fs::permissions(dir, fs::perms::owner_write, fs::perm_options::add);
    return dir;
}

const char* kActor = "fsdp2_llama_w4/global_step_10/actor";
const char* kRank1 = "/model_world_size_4_rank_1.pt";

/// Nothing at all beside where the merge was told to write: no output, no temporary folder.
void verifyNothingWritten(const std::string& parent)
{
    QVERIFY2(fs::is_empty(parent), qPrintable(q(parent + " is not empty")));
}

} // namespace

class TestZipIntegrity : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void crc32MatchesZip()
    {
        const std::string check = "123456789";
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(check.data());
        QCOMPARE(crc32Update(0, bytes, check.size()), 0xCBF43926u);
        QCOMPARE(crc32Update(0, bytes, 0), 0u);
        // Streaming in uneven pieces gives the same value as one call.
        std::string long_(1000, '\0');
        for (std::size_t i = 0; i < long_.size(); ++i)
            long_[i] = static_cast<char>(i * 7 + 3);
        const auto* data = reinterpret_cast<const std::uint8_t*>(long_.data());
        const std::uint32_t whole = crc32Update(0, data, long_.size());
        std::uint32_t pieces = 0;
        for (std::size_t at = 0, step = 1; at < long_.size(); at += step, step = step * 2 + 1)
            pieces = crc32Update(pieces, data + at, std::min(step, long_.size() - at));
        QCOMPARE(pieces, whole);
        // Every length and alignment against the bit-by-bit definition (the fast paths fold 64 and 8 bytes at once).
        auto bitwise = [](const std::uint8_t* p, std::size_t n) {
            std::uint32_t crc = 0xFFFFFFFFu;
            for (std::size_t i = 0; i < n; ++i) {
                crc ^= p[i];
                for (int k = 0; k < 8; ++k)
                    crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
            }
            return ~crc;
        };
        for (std::size_t offset = 0; offset < 9; ++offset)
            for (std::size_t n = 0; n + offset <= long_.size(); n += n < 200 ? 1 : 61)
                QCOMPARE(crc32Update(0, data + offset, n), bitwise(data + offset, n));
    }

    void flippedBitInTensorDataFailsMergeAndWritesNothing()
    {
        const std::string actor = copyFixture(kActor);
        std::string bytes = test::readFile(actor + kRank1);
        const RecordAt record = findRecord(bytes, "/data/0");
        QVERIFY(record.local != std::string::npos && record.size > 0);
        bytes[record.payload + record.size / 2] ^= 0x10;
        test::writeFile(actor + kRank1, bytes);

        const std::string parent = test::makeTempDir();
        QString out, err;
        QCOMPARE(test::runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), q(actor),
                                    QStringLiteral("--target_dir"), q(parent + "/merged"), QStringLiteral("--quiet") },
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("CRC-32 mismatch")), qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("model_world_size_4_rank_1.pt")), qPrintable(err));
        QVERIFY2(err.contains(QStringLiteral("data/0")), qPrintable(err));
        verifyNothingWritten(parent);
    }

    void flippedBitFailsTestAndDiff()
    {
        const std::string actor = copyFixture(kActor);
        std::string bytes = test::readFile(actor + kRank1);
        const RecordAt record = findRecord(bytes, "/data/0");
        QVERIFY(record.local != std::string::npos);
        bytes[record.payload] ^= 0x01;
        test::writeFile(actor + kRank1, bytes);
        const QString reference = q(test::fixture("fsdp2_llama_w4/reference"));
        QString out, err;
        QCOMPARE(test::runTessera({ QStringLiteral("test"), QStringLiteral("--local_dir"), q(actor),
                                    QStringLiteral("--test_hf_dir"), reference },
                                  &out, &err),
                 1);
        QVERIFY2(QString(out + err).contains(QStringLiteral("CRC-32 mismatch")), qPrintable(QString(out + err)));
        QCOMPARE(test::runTessera({ QStringLiteral("diff"), q(actor), reference }, &out, &err), 1);
        QVERIFY2(QString(out + err).contains(QStringLiteral("CRC-32 mismatch")), qPrintable(QString(out + err)));
    }

    void flippedBitInDcpItemFailsMerge()
    {
        const std::string dcp = copyFixture("fsdp2_llama_w4/dcp");
        const std::string file = dcp + "/__2_0.distcp";
        std::string bytes = test::readFile(file);
        const RecordAt record = findRecord(bytes, "/data/0");
        QVERIFY(record.local != std::string::npos && record.size > 0);
        bytes[record.payload + record.size - 1] ^= 0x80;
        test::writeFile(file, bytes);
        const std::string parent = test::makeTempDir();
        QString out, err;
        QCOMPARE(test::runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), q(dcp),
                                    QStringLiteral("--hf_model_path"), q(test::fixture(std::string(kActor) + "/huggingface")),
                                    QStringLiteral("--target_dir"), q(parent + "/merged"), QStringLiteral("--quiet") },
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("CRC-32 mismatch")) && err.contains(QStringLiteral("__2_0.distcp")),
                 qPrintable(err));
        verifyNothingWritten(parent);
    }

    void flippedBitInPickleIsRefusedByInspect()
    {
        const std::string actor = copyFixture(kActor);
        std::string bytes = test::readFile(actor + kRank1);
        const RecordAt record = findRecord(bytes, "/data.pkl");
        QVERIFY(record.local != std::string::npos && record.size > 16);
        // A byte inside a string of the pickle: the unpickler alone would not notice.
        bytes[record.payload + record.size / 2] ^= 0x02;
        test::writeFile(actor + kRank1, bytes);
        QString out, err;
        QCOMPARE(test::runTessera({ QStringLiteral("inspect"), q(actor) }, &out, &err), 1);
        QVERIFY2(QString(out + err).contains(QStringLiteral("CRC-32 mismatch")), qPrintable(QString(out + err)));
        QVERIFY2(QString(out + err).contains(QStringLiteral("data.pkl")), qPrintable(QString(out + err)));
    }

    void deflatedStorageRecordIsRefused()
    {
        const std::string actor = copyFixture(kActor);
        std::string bytes = test::readFile(actor + kRank1);
        const RecordAt record = findRecord(bytes, "/data/3");
        QVERIFY(record.local != std::string::npos && record.central != std::string::npos);
        // Method 8 (deflate) in both headers, as another zip tool would write it.
        bytes[record.local + 8] = 8;
        bytes[record.central + 10] = 8;
        test::writeFile(actor + kRank1, bytes);
        const std::string parent = test::makeTempDir();
        QString out, err;
        QCOMPARE(test::runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), q(actor),
                                    QStringLiteral("--target_dir"), q(parent + "/merged"), QStringLiteral("--quiet") },
                                  &out, &err),
                 1);
        QVERIFY2(err.contains(QStringLiteral("is compressed")) && err.contains(QStringLiteral("data/3"))
                     && err.contains(QStringLiteral("model_world_size_4_rank_1.pt")),
                 qPrintable(err));
        verifyNothingWritten(parent);
        // inspect reads no tensor data, but it reads the record's method: it reports the file too.
        QCOMPARE(test::runTessera({ QStringLiteral("inspect"), q(actor) }, &out, &err), 1);
        QVERIFY2(QString(out + err).contains(QStringLiteral("is compressed")), qPrintable(QString(out + err)));
    }

    void intactCopyStillMergesBitExact()
    {
        const std::string actor = copyFixture(kActor);
        const std::string target = test::makeTempDir() + "/merged";
        QString out, err;
        QCOMPARE(test::runTessera({ QStringLiteral("merge"), QStringLiteral("--local_dir"), q(actor),
                                    QStringLiteral("--target_dir"), q(target), QStringLiteral("--quiet") },
                                  &out, &err),
                 0);
        QVERIFY(test::readFile(target + "/model.safetensors")
                == test::readFile(test::fixture("fsdp2_llama_w4/reference/model.safetensors")));
    }
};

QTEST_GUILESS_MAIN(TestZipIntegrity)
#include "tst_zip_integrity.moc"
