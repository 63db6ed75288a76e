// SPDX-License-Identifier: GPL-3.0-or-later
// The layout registry (formats/layout_registry.h) is the one list of the layouts Tessera reads: scan recognises
// every fixture through it, its "no checkpoint found" message names what the list looks for, the README's table
// is the list, and no code outside formats/ compares a layout's name with words of its own.

#include "testutil.h"

#include "formats/layout_registry.h"
#include "formats/scan.h"

#include <QTest>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace fs = std::filesystem;
using namespace tessera;

namespace {

/// The source tree: tests/fixtures is TESSERA_TEST_DATA_DIR.
fs::path sourceRoot() { return fs::path(TESSERA_TEST_DATA_DIR).parent_path().parent_path(); }

std::string withoutBackticks(std::string text)
{
    text.erase(std::remove(text.begin(), text.end(), '`'), text.end());
    return text;
}

} // namespace

class TestLayoutRegistry : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void namesAreUnique()
    {
        std::set<std::string> names;
        for (const auto& entry : layoutRegistry()) {
            QVERIFY2(names.insert(entry.name).second, entry.name);
            QCOMPARE(findLayout(entry.name), &entry);
            QVERIFY(entry.scan);
            QVERIFY2(entry.folderRule || entry.fileRule || entry.family == LayoutFamily::Megatron, entry.name);
        }
        QCOMPARE(findLayout("hf (mapped from megatron-legacy)"), nullptr);
    }

    void scansEveryFixtureToItsLayout_data()
    {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QString>("layout");
        QTest::newRow("verl FSDP run root") << QStringLiteral("fsdp2_llama_w4") << QStringLiteral("verl-fsdp");
        QTest::newRow("DCP") << QStringLiteral("fsdp2_llama_w4/dcp") << QStringLiteral("dcp");
        QTest::newRow("DCP's .metadata") << QStringLiteral("fsdp2_llama_w4/dcp/.metadata") << QStringLiteral("dcp");
        QTest::newRow("Hugging Face folder") << QStringLiteral("fsdp2_llama_w4/reference")
                                             << QStringLiteral("hf-safetensors");
        QTest::newRow("Megatron legacy step") << QStringLiteral("megatron_legacy_qwen2_tp2_pp2/global_step_10")
                                              << QStringLiteral("megatron-legacy");
        QTest::newRow("Megatron torch_dist actor") << QStringLiteral("megatron_dist_llama_tp2_pp2/global_step_10/actor")
                                                   << QStringLiteral("megatron-dist");
    }

    void scansEveryFixtureToItsLayout()
    {
        QFETCH(QString, path);
        QFETCH(QString, layout);
        auto info = scanCheckpoint(test::fixture(path.toStdString()));
        QVERIFY_RESULT(info);
        QCOMPARE(QString::fromStdString(info->layout), layout);
        QVERIFY(findLayout(info->layout));
    }

    void familiesAnswerTheQuestionsAsked()
    {
        for (const char* name : { "megatron-legacy", "megatron-lm", "megatron-dist" })
            QVERIFY2(isMegatronLayout(name), name);
        QVERIFY(hasMegatronRankFolders("megatron-legacy") && hasMegatronRankFolders("megatron-lm"));
        QVERIFY(!hasMegatronRankFolders("megatron-dist"));
        QVERIFY(isHuggingFaceLayout("hf-safetensors"));
        QCOMPARE(layoutFamily("verl-fsdp"), LayoutFamily::TorchSave);
        QCOMPARE(layoutFamily("torch-save"), LayoutFamily::TorchSave);
        QCOMPARE(layoutFamily("dcp"), LayoutFamily::Dcp);
        QCOMPARE(layoutFamily("gguf"), LayoutFamily::Gguf);
        // Names no reader gives: a model mapped to Hugging Face names, a split's preview.
        for (const char* name : { "hf (mapped from megatron-legacy)", "planned megatron", "megatron", "" }) {
            QCOMPARE(layoutFamily(name), LayoutFamily::Unknown);
            QVERIFY2(!isMegatronLayout(name) && !isHuggingFaceLayout(name), name);
        }
    }

    void noCheckpointFoundNamesWhatTheListLooksFor()
    {
        const std::string empty = test::makeTempDir();
        auto info = scanCheckpoint(empty);
        QVERIFY(!info);
        const std::string& message = info.error().message;
        QVERIFY2(message.rfind(empty + ": no checkpoint found. Tessera looks for ", 0) == 0, message.c_str());
        for (const auto& entry : layoutRegistry())
            if (entry.lookedFor)
                QVERIFY2(message.find(entry.lookedFor) != std::string::npos, entry.name);
        QVERIFY(message.find("latest_checkpointed_iteration.txt") != std::string::npos);
    }

    /// The README's table of layouts is the registry, row by row and in its order (code formatting aside).
    void readmeTableIsTheRegistry()
    {
        std::ifstream readme(sourceRoot() / "README.md");
        QVERIFY(readme);
        std::vector<std::pair<std::string, std::string>> rows;
        bool inTable = false;
        static const std::regex row("\\| `([^`]+)` \\| (.*) \\|");
        for (std::string line; std::getline(readme, line);) {
            if (line == "| layout | what it is |") {
                inTable = true;
                continue;
            }
            std::smatch m;
            if (inTable && std::regex_match(line, m, row))
                rows.emplace_back(m[1], withoutBackticks(m[2]));
            else if (inTable && line.rfind('|', 0) != 0)
                break;
        }
        QCOMPARE(rows.size(), layoutRegistry().size());
        for (std::size_t i = 0; i < rows.size(); ++i) {
            QCOMPARE(rows[i].first, std::string(layoutRegistry()[i].name));
            QCOMPARE(rows[i].second, std::string(layoutRegistry()[i].description));
        }
    }

    /// Outside formats/, a layout is asked of the registry: no line compares a layout with a string literal
    /// (layout == "dcp", layout.rfind("megatron", 0) …).
    void noLayoutNameComparedOutsideFormats()
    {
        // (moc reads this file too, and misreads raw strings holding quotes: hence the escapes)
        static const std::regex compared("layout[^;]*(==|!=)\\s*\"|\"\\s*(==|!=)[^;]*layout"
                                         "|layout[\\w>.-]*\\.(rfind|find|compare|starts_with)\\(\""
                                         "|startsWith\\([^,]*layout[^,]*,\\s*\"");
        QStringList found;
        for (const char* dir : { "core", "app", "ui" })
            for (const auto& entry : fs::recursive_directory_iterator(sourceRoot() / dir)) {
                const fs::path& path = entry.path();
                if (path.extension() != ".cpp" && path.extension() != ".h")
                    continue;
                if (path.parent_path() == sourceRoot() / "core" / "formats")
                    continue;
                std::ifstream in(path);
                int number = 0;
                for (std::string line; std::getline(in, line);) {
                    ++number;
                    if (std::regex_search(line, compared))
                        found << QStringLiteral("%1:%2: %3")
                                     .arg(QString::fromStdString(path.lexically_relative(sourceRoot()).string()))
                                     .arg(number)
                                     .arg(QString::fromStdString(line).trimmed());
                }
            }
        QVERIFY2(found.isEmpty(), qPrintable(found.join(QLatin1Char('\n'))));
    }
};

QTEST_GUILESS_MAIN(TestLayoutRegistry)
#include "tst_layout_registry.moc"
