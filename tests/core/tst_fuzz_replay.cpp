// SPDX-License-Identifier: GPL-3.0-or-later
// Replays, through the same bodies the libFuzzer targets run (fuzz/targets/), every seed of fuzz/corpus/<target>
// and every input that ever made a target fail (tests/fuzz_regressions/<target>/). Built without libFuzzer, so
// the normal suite (and its ASan + UBSan run) keeps every past finding fixed.

#include "fuzz_targets.h"

#include "testutil.h"

#include <QObject>

#include <filesystem>
#include <set>

namespace fs = std::filesystem;
using namespace tessera;

namespace {

const fs::path kCorpusDir = fs::path(TESSERA_TEST_DATA_DIR) / ".." / ".." / "fuzz" / "corpus";
const fs::path kDictDir = fs::path(TESSERA_TEST_DATA_DIR) / ".." / ".." / "fuzz" / "dict";
const fs::path kRegressionDir = fs::path(TESSERA_TEST_DATA_DIR) / ".." / "fuzz_regressions";

std::vector<fs::path> filesIn(const fs::path& dir)
{
    std::vector<fs::path> files;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file() && it->path().filename().string().front() != '.')
            files.push_back(it->path());
    std::sort(files.begin(), files.end());
    return files;
}

} // namespace

class TestFuzzReplay : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void everyTargetHasSeedsAndADictionary()
    {
        for (const auto& target : fuzz::fuzzTargets()) {
            QVERIFY2(!filesIn(kCorpusDir / target.name).empty(), target.name);
            QVERIFY2(fs::is_regular_file(kDictDir / (std::string(target.name) + ".dict")), target.name);
        }
    }

    void regressionFoldersNameTargets()
    {
        std::set<std::string> names;
        for (const auto& target : fuzz::fuzzTargets())
            names.insert(target.name);
        std::error_code ec;
        for (fs::directory_iterator it(kRegressionDir, ec), end; !ec && it != end; it.increment(ec))
            if (it->is_directory())
                QVERIFY2(names.count(it->path().filename().string()),
                         qPrintable(QStringLiteral("tests/fuzz_regressions/%1 is not a fuzz target")
                                        .arg(QString::fromStdString(it->path().filename().string()))));
    }

    void replay_data()
    {
        QTest::addColumn<int>("target");
        QTest::addColumn<QString>("path");
        const auto& targets = fuzz::fuzzTargets();
        for (std::size_t i = 0; i < targets.size(); ++i)
            for (const fs::path& dir : { kCorpusDir / targets[i].name, kRegressionDir / targets[i].name })
                for (const auto& file : filesIn(dir))
                    QTest::newRow(qPrintable(QString::fromStdString(std::string(targets[i].name) + "/"
                                                                    + dir.parent_path().filename().string() + "/"
                                                                    + file.filename().string())))
                        << static_cast<int>(i) << QString::fromStdString(file.string());
    }

    void replay()
    {
        QFETCH(int, target);
        QFETCH(QString, path);
        const std::string bytes = test::readFile(path.toStdString());
        const auto& body = fuzz::fuzzTargets()[static_cast<std::size_t>(target)].body;
        // A crash, a sanitizer report or a hang fails the test; the body returns 0 for every input.
        QCOMPARE(body(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
    }
};

QTEST_GUILESS_MAIN(TestFuzzReplay)
#include "tst_fuzz_replay.moc"
