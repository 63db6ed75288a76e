// SPDX-License-Identifier: GPL-3.0-or-later
// torch.save archives: the ZIP container, storages, and damaged files.

#include "testutil.h"

#include "pickle/saved_tensor.h"
#include "pickle/torch_save.h"
#include "io/zip_archive.h"

#include <QTest>

#include <filesystem>

using namespace tessera;

namespace {
const std::string kRank0 = "fsdp2_llama_w4/global_step_10/actor/model_world_size_4_rank_0.pt";

std::string copyFixture(const std::string& relative, const std::string& name)
{
    const std::string dir = test::makeTempDir();
    const std::string path = dir + "/" + name;
    test::writeFile(path, test::readFile(test::fixture(relative)));
    return path;
}
} // namespace

class TestTorchSave : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void readsArchiveWithAnyFolderName()
    {
        auto file = TorchSaveFile::open(test::fixture(kRank0));
        QVERIFY_RESULT(file);
        QCOMPARE(file->root()->kind, PyValue::Kind::Dict);
        const auto items = stateDictItems(file->root());
        QCOMPARE(items.size(), std::size_t(39));
        QCOMPARE(QString::fromStdString(items.front().first), QStringLiteral("model.embed_tokens.weight"));
    }

    void readsDTensorSpec()
    {
        auto file = TorchSaveFile::open(test::fixture("hsdp_qwen2_2x2/global_step_10/actor/model_world_size_4_rank_3.pt"));
        QVERIFY_RESULT(file);
        const auto items = stateDictItems(file->root());
        auto saved = interpretSavedTensor(items.front().second, *file);
        QVERIFY_RESULT(saved);
        QVERIFY(saved->has_value());
        const SavedTensor& t = **saved;
        QCOMPARE(t.kind, SavedTensor::Kind::DTensor);
        QCOMPARE(t.dtype, DType::BFloat16);
        QCOMPARE(t.globalShape, (Shape { 512, 64 }));
        QCOMPARE(t.local.shape, (Shape { 256, 64 }));
        QCOMPARE(t.mesh.shape, (Shape { 2, 2 }));
        QCOMPARE(t.mesh.ranks, (std::vector<std::int64_t> { 0, 1, 2, 3 }));
        QCOMPARE(t.mesh.dimNames, (std::vector<std::string> { "ddp", "fsdp" }));
        QCOMPARE(t.coordinate, (Shape { 1, 1 }));
        QCOMPARE(t.placements.size(), std::size_t(2));
        QCOMPARE(t.placements[0].kind, Placement::Kind::Replicate);
        QCOMPARE(t.placements[1].kind, Placement::Kind::Shard);
    }

    void readsDcpItemAtOffset()
    {
        // Every chunk of a .distcp is a complete torch.save archive named "archive/" at some offset.
        auto mapped = MappedFile::open(test::fixture("fsdp2_llama_w4/dcp/__0_0.distcp"));
        QVERIFY_RESULT(mapped);
        auto zip = ZipArchive::open((*mapped)->view(), "distcp");
        QVERIFY_RESULT(zip);
        QCOMPARE(QString::fromStdString(zip->prefix()), QStringLiteral("archive"));
    }

    void damagedFiles_data()
    {
        QTest::addColumn<QString>("damage");
        QTest::addColumn<QString>("expected");
        QTest::newRow("empty") << "empty" << "empty";
        QTest::newRow("truncated") << "truncated" << "truncated";
        QTest::newRow("half") << "half" << "";
        QTest::newRow("not zip") << "text" << "not a torch.save archive";
        QTest::newRow("legacy") << "legacy" << "legacy";
    }

    void damagedFiles()
    {
        QFETCH(QString, damage);
        QFETCH(QString, expected);
        const std::string path = copyFixture(kRank0, "model_world_size_4_rank_0.pt");
        std::string bytes = test::readFile(path);
        if (damage == QLatin1String("empty"))
            bytes.clear();
        else if (damage == QLatin1String("truncated"))
            bytes.resize(bytes.size() - 100);
        else if (damage == QLatin1String("half"))
            bytes.resize(bytes.size() / 2);
        else if (damage == QLatin1String("text"))
            bytes = "hello, this is not a checkpoint\n";
        else if (damage == QLatin1String("legacy"))
            bytes = std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e", 15) + "rest";
        test::writeFile(path, bytes);
        auto file = TorchSaveFile::open(path);
        QVERIFY(!file);
        const QString message = QString::fromStdString(file.error().message);
        QVERIFY2(message.contains(QString::fromStdString(path)), qPrintable(message));
        QVERIFY2(message.contains(expected), qPrintable(message));
    }

    void flippedBytesNeverCrash()
    {
        // Flip bytes all over a real rank file: each read must succeed or fail with a message, never crash.
        const std::string original = test::readFile(test::fixture(kRank0));
        const std::string path = copyFixture(kRank0, "flip.pt");
        std::uint32_t seed = 7;
        for (int i = 0; i < 300; ++i) {
            std::string bytes = original;
            for (int k = 0; k < 4; ++k) {
                seed = seed * 1664525u + 1013904223u;
                const std::size_t pos = (i < 150) ? seed % std::min<std::size_t>(bytes.size(), 40000)
                                                  : bytes.size() - 1 - seed % 2000; // pickle, then directory
                bytes[pos] = static_cast<char>(bytes[pos] ^ static_cast<char>(1 + (seed >> 24) % 255));
            }
            test::writeFile(path, bytes);
            auto file = TorchSaveFile::open(path);
            if (!file)
                continue;
            for (const auto& [name, value] : stateDictItems(file->root())) {
                auto saved = interpretSavedTensor(value, *file);
                if (saved && saved->has_value() && (*saved)->kind == SavedTensor::Kind::Plain)
                    (void)file->piece((*saved)->local, Shape((*saved)->local.shape.size(), 0));
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestTorchSave)
#include "tst_torch_save.moc"
