// SPDX-License-Identifier: GPL-3.0-or-later
// io/regex: RE2 behind the meaning std::regex gave the core's patterns (full match or search, leftmost-first
// groups, bytes rather than UTF-8), its refusals named for the user, and inputs that overflowed or hung
// std::regex answered instead.

#include "testutil.h"

#include "io/regex.h"

#include <QTest>

#include <cstring>

using namespace tessera;

namespace {

std::string errorOf(const Result<Regex>& r) { return r ? std::string() : r.error().message; }

bool mentions(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

} // namespace

class TestRegex : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void fullMatchAndSearch()
    {
        auto re = Regex::compile("layers\\.[0-9]+", "--x");
        QVERIFY_RESULT(re);
        QVERIFY(re->fullMatch("layers.12"));
        QVERIFY(!re->fullMatch("decoder.layers.12"));
        QVERIFY(re->search("decoder.layers.12.weight"));
        QVERIFY(!re->search("decoder.final_layernorm.weight"));
        auto anchored = Regex::compile("^model\\.norm$", "--x");
        QVERIFY_RESULT(anchored);
        QVERIFY(anchored->search("model.norm"));
        QVERIFY(!anchored->search("model.norm.weight"));
    }

    void groupsAreLeftmostFirstAsInECMAScript()
    {
        // The lazy prefix stops at the first "layers." that the rest can follow, as std::regex_match did.
        const Regex layer = Regex::fixed(R"((.*?\blayers\.)(\d+)\.(.+))");
        std::vector<std::string> m;
        QVERIFY(layer.fullMatch("decoder.layers.3.mlp.layers.4.w", m));
        QCOMPARE(m, (std::vector<std::string> { "decoder.layers.", "3", "mlp.layers.4.w" }));
        QVERIFY(layer.fullMatch("vision.layers.x.layers.7.w", m));
        QCOMPARE(m[0], std::string("vision.layers.x.layers."));
        // \b: "sublayers." is no layer stack.
        QVERIFY(!layer.fullMatch("sublayers.3.w", m));
        // Greedy groups take what they can and leave the rest its least.
        const Regex greedy = Regex::fixed("(a*)(a*)");
        QVERIFY(greedy.fullMatch("aaa", m));
        QCOMPARE(m, (std::vector<std::string> { "aaa", "" }));
        // A group that takes no part is empty.
        const Regex optional = Regex::fixed("mp_rank_(\\d{2,})(?:_(\\d{3,}))?");
        QVERIFY(optional.fullMatch("mp_rank_01", m));
        QCOMPARE(m, (std::vector<std::string> { "01", "" }));
        QCOMPARE(optional.groupCount(), 2);
    }

    void findAllWalksTheMatchesLeftToRight()
    {
        const Regex number = Regex::fixed(R"((?:\blayers\.|\blocal_experts\.)(\d+))");
        QCOMPARE(number.findAll("decoder.layers.3.mlp.experts.local_experts.12.w", 1),
                 (std::vector<std::string> { "3", "12" }));
        // \b judges the byte before each start, as std::sregex_iterator does.
        QCOMPARE(number.findAll("xlayers.1.layers.2", 1), (std::vector<std::string> { "2" }));
        QCOMPARE(number.findAll("no numbers here", 1), std::vector<std::string> {});
        QCOMPARE(Regex::fixed("a*").findAll("baa"), (std::vector<std::string> { "", "aa", "" }));
    }

    void textIsBytes()
    {
        // A name need not be UTF-8: every byte but a newline matches '.', as with std::regex over char.
        const Regex any = Regex::fixed("model\\.(.+)");
        std::vector<std::string> m;
        QVERIFY(any.fullMatch(std::string("model.\xff\xfe\0x", 10), m));
        QCOMPARE(m[0], std::string("\xff\xfe\0x", 4));
        QVERIFY(!any.fullMatch("model.a\nb"));
        // A UTF-8 pattern matches the same UTF-8 bytes in a name.
        auto accented = Regex::compile("caf\xc3\xa9", "--x");
        QVERIFY_RESULT(accented);
        QVERIFY(accented->search("model.caf\xc3\xa9.weight"));
    }

    void whatRe2LacksIsRefusedByName()
    {
        const std::pair<const char*, const char*> refused[] = {
            { "a(?=b)", "uses a lookahead (?=…), which RE2 (Tessera's linear-time regex engine) does not have: match "
                        "the names themselves instead" },
            { "a(?!b)", "uses a negative lookahead (?!…)" },
            { "(?<=a)b", "uses a lookbehind (?<=…)" },
            { "(?<!a)b", "uses a negative lookbehind (?<!…)" },
            { "(a)\\1", "uses a backreference (\\1), which RE2 (Tessera's linear-time regex engine) does not have: "
                        "repeat the group's pattern instead" },
            { "(?P<x>a)\\k<x>", "uses a named backreference (\\k<…>)" },
            { "(?<x>a)", "uses a named group (?<name>…), which RE2 (Tessera's linear-time regex engine) does not "
                         "have: write it (?P<name>…)" },
            { "model.(", "--x 'model.(' is not a valid regular expression (RE2 syntax): missing ): model.(" },
            { "a{1001}", "is not a valid regular expression (RE2 syntax): invalid repetition size: {1001}" },
        };
        for (const auto& [pattern, message] : refused) {
            const std::string error = errorOf(Regex::compile(pattern, "--x"));
            QVERIFY2(mentions(error, message), (std::string(pattern) + " → " + error).c_str());
        }
        // Escaped, in a class or quoted, the same characters are plain text: these fail for their unclosed '('.
        for (const char* text : { "\\(?=a(", "[(?=](", "\\Q(?=\\E(", "[]a(?=](", "\\\\1(" }) {
            const std::string error = errorOf(Regex::compile(text, "--x"));
            QVERIFY2(mentions(error, "is not a valid regular expression (RE2 syntax): missing )"), error.c_str());
            QVERIFY(Regex::compile(std::string(text, std::strlen(text) - 1), "--x"));
        }
    }

    void lengthIsBounded()
    {
        QVERIFY(Regex::compile(std::string(kMaxRegexLength, 'a'), "--x"));
        const std::string error = errorOf(Regex::compile(std::string(kMaxRegexLength + 1, 'a'), "--x"));
        QVERIFY2(mentions(error, "is 4097 characters long; at most 4096 are accepted"), error.c_str());
    }

    void pathologicalInputsAreAnswered()
    {
        // Each of these overflowed std::regex's stack (it recursed per character) or ran for hours (it tried every
        // way of splitting the text among the groups). RE2 answers them in one pass.
        const std::string name = "decoder.layers.0." + std::string(30000, 'x') + ".weight";
        std::vector<std::string> m;
        QVERIFY(Regex::fixed(R"((.*?\blayers\.)(\d+)\.(.+))").fullMatch(name, m));
        QCOMPARE(m[2].size(), std::size_t(30007));
        QCOMPARE(Regex::fixed(R"((?:\blayers\.)(\d+))").findAll("layers." + std::string(60000, '7'), 1).front().size(),
                 std::size_t(60000));

        auto alternatives = Regex::compile("^(.|.)*Q$", "--x");
        QVERIFY_RESULT(alternatives);
        QVERIFY(!alternatives->search(name));
        QVERIFY(alternatives->search(name + "Q"));
        std::string optional;
        for (int i = 0; i < 600; ++i)
            optional += "(?:.?)";
        auto optionals = Regex::compile(optional + "Q", "--x");
        QVERIFY_RESULT(optionals);
        QVERIFY(!optionals->search(name));
        QVERIFY(optionals->fullMatch(std::string(600, 'a') + "Q"));
        // 2,000 nested groups: under the length bound, and no danger to an engine that does not recurse.
        auto nested = Regex::compile(std::string(2000, '(') + "a" + std::string(2000, ')'), "--x");
        QVERIFY_RESULT(nested);
        QVERIFY(nested->fullMatch("a"));
    }
};

QTEST_GUILESS_MAIN(TestRegex)
#include "tst_regex.moc"
