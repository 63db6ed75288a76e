// SPDX-License-Identifier: GPL-3.0-or-later
// No function in core/, app/ or ui/ is longer than a reader can hold: a body over 100 lines is split into named
// steps. The one exception is the unpickler's opcode switch (Machine::step), a flat table of small cases that
// reads best as one switch. A body is what lies between a `{` line and the next `}` line, both at column 0 — how
// every function and constructor here is written (tst_function_length checks the rule on a sample too).
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr int kMaxBodyLines = 100;

fs::path sourceRoot() { return fs::path(TESSERA_TEST_DATA_DIR).parent_path().parent_path(); }

struct LongBody {
    std::string where; // file:line of the opening brace
    std::string signature;
    int lines = 0;
};

/// The signature's first line: the nearest line above the brace that starts at column 0 (an initializer list or
/// a wrapped parameter list is indented or begins with ':').
std::string signatureAbove(const std::vector<std::string>& lines, std::size_t brace)
{
    std::size_t at = brace;
    while (at > 0) {
        --at;
        const std::string& l = lines[at];
        if (!l.empty() && l[0] != ' ' && l[0] != ':')
            return l;
    }
    return {};
}

std::vector<LongBody> longBodies(std::istream& in, const std::string& shownName)
{
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    std::vector<LongBody> found;
    bool open = false;
    std::size_t start = 0;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (lines[i] == "{") {
            open = true;
            start = i;
        } else if (lines[i] == "}" && open) {
            open = false;
            const int length = static_cast<int>(i - start + 1);
            if (length > kMaxBodyLines)
                found.push_back({ shownName + ":" + std::to_string(start + 1), signatureAbove(lines, start), length });
        }
    }
    return found;
}

bool isAllowed(const LongBody& body) { return body.signature.find("Machine::step(") != std::string::npos; }

} // namespace

class FunctionLength : public QObject {
    Q_OBJECT
private Q_SLOTS:
    /// The detector finds a long body, names it, and leaves short ones and indented braces alone.
    void detectorFindsLongBodies()
    {
        std::ostringstream text;
        text << "int shortOne()\n{\n    return 1;\n}\n";
        text << "Result<Plan> planEverything(const Info& info,\n    const Options& options)\n{\n";
        for (int i = 0; i < kMaxBodyLines; ++i)
            text << "    step(" << i << ");\n";
        text << "    if (x) {\n    }\n}\n";
        std::istringstream in(text.str());
        const auto found = longBodies(in, "sample.cpp");
        QCOMPARE(found.size(), std::size_t(1));
        QCOMPARE(found[0].where, std::string("sample.cpp:7"));
        QCOMPARE(found[0].signature, std::string("Result<Plan> planEverything(const Info& info,"));
        QCOMPARE(found[0].lines, kMaxBodyLines + 4);
    }

    void noFunctionOverAHundredLines()
    {
        std::vector<std::string> problems;
        int files = 0;
        for (const char* dir : { "core", "app", "ui" }) {
            for (const auto& entry : fs::recursive_directory_iterator(sourceRoot() / dir)) {
                const std::string ext = entry.path().extension().string();
                if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h"))
                    continue;
                ++files;
                std::ifstream in(entry.path());
                const std::string shown = fs::relative(entry.path(), sourceRoot()).generic_string();
                for (const LongBody& body : longBodies(in, shown))
                    if (!isAllowed(body))
                        problems.push_back(body.where + ": " + std::to_string(body.lines) + " lines: " + body.signature);
            }
        }
        QVERIFY2(files > 100, "the source folders were not found");
        std::string message = std::to_string(problems.size()) + " functions over " + std::to_string(kMaxBodyLines)
            + " lines (above); split each into named steps";
        for (const auto& p : problems)
            qWarning("%s", p.c_str()); // QVERIFY2 cuts a long message: each on its own line
        QVERIFY2(problems.empty(), message.c_str());
    }
};

QTEST_GUILESS_MAIN(FunctionLength)
#include "tst_function_length.moc"
