// SPDX-License-Identifier: GPL-3.0-or-later
// Every lambda in app/ and ui/ that builds a string names its return type. The Qt targets define
// QT_USE_QSTRINGBUILDER, so `a + b` of two QStrings is a QStringBuilder that refers to its operands: a lambda whose
// return type is deduced returns that builder, pointing at temporaries that die when it returns, and whoever
// turns it into a QString later reads freed memory. `-> QString` (or `-> std::string`) makes the lambda build the
// string before it returns. The scan is textual, like tst_function_length: a lambda is `[captures] (params)
// specifiers {body}` where `[` does not follow a name, `)` or `]` (a subscript); it builds a string when one of
// its own return expressions (not a nested lambda's) concatenates with + or %, or names a string type or literal,
// and is not a comparison or logical test.
#include <QtTest>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path sourceRoot() { return fs::path(TESSERA_TEST_DATA_DIR).parent_path().parent_path(); }

bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// `text` with comments removed and the contents of string and character literals emptied (`"…"` becomes `""`),
/// so that braces, brackets and keywords inside them are not read as code. Line breaks are kept.
std::string codeOnly(const std::string& text)
{
    std::string out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        const char c = text[i];
        if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
            while (i < text.size() && text[i] != '\n')
                ++i;
        } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
            const std::size_t end = text.find("*/", i + 2);
            const std::size_t stop = end == std::string::npos ? text.size() : end + 2;
            for (; i < stop; ++i)
                if (text[i] == '\n')
                    out += '\n';
        } else if (c == 'R' && i + 1 < text.size() && text[i + 1] == '"' && (i == 0 || !isNameChar(text[i - 1]))) {
            // A raw string R"delim( … )delim".
            const std::size_t open = text.find('(', i + 2);
            const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
            const std::size_t end = text.find(close, open);
            const std::size_t stop = end == std::string::npos ? text.size() : end + close.size();
            out += "\"\"";
            for (; i < stop; ++i)
                if (text[i] == '\n')
                    out += '\n';
        } else if (c == '"' || (c == '\'' && (i == 0 || !std::isxdigit(static_cast<unsigned char>(text[i - 1]))))) {
            // A string or character literal (a ' between hex digits is a digit separator: 1'000).
            ++i;
            while (i < text.size() && text[i] != c) {
                if (text[i] == '\\')
                    ++i;
                ++i;
            }
            ++i;
            out += c;
            out += c;
        } else {
            out += c;
            ++i;
        }
    }
    return out;
}

/// The index just past the bracket that closes the one at `open` (any of ([{ nested), or npos.
std::size_t pastClosing(const std::string& code, std::size_t open)
{
    int depth = 0;
    for (std::size_t i = open; i < code.size(); ++i) {
        const char c = code[i];
        if (c == '(' || c == '[' || c == '{')
            ++depth;
        else if ((c == ')' || c == ']' || c == '}') && --depth == 0)
            return i + 1;
    }
    return std::string::npos;
}

std::size_t skipSpace(const std::string& code, std::size_t i)
{
    while (i < code.size() && std::isspace(static_cast<unsigned char>(code[i])))
        ++i;
    return i;
}

struct Lambda {
    std::size_t start = 0;         ///< its `[`
    std::size_t bodyBegin = 0;     ///< just past its `{`
    std::size_t bodyEnd = 0;       ///< its closing `}`
    std::string returnType;        ///< after `->`, trimmed; empty when deduced
};

/// The lambda introduced by the `[` at `at`, if it is one.
std::optional<Lambda> lambdaAt(const std::string& code, std::size_t at)
{
    std::size_t before = at;
    while (before > 0 && std::isspace(static_cast<unsigned char>(code[before - 1])))
        --before;
    if (before > 0 && (isNameChar(code[before - 1]) || code[before - 1] == ')' || code[before - 1] == ']')) {
        // A subscript or a structured binding — unless the name is `return`.
        if (before < 6 || code.compare(before - 6, 6, "return") != 0 || (before > 6 && isNameChar(code[before - 7])))
            return std::nullopt;
    }
    if (at + 1 < code.size() && code[at + 1] == '[')
        return std::nullopt; // an attribute [[…]]
    std::size_t i = pastClosing(code, at);
    if (i == std::string::npos)
        return std::nullopt;
    i = skipSpace(code, i);
    if (i < code.size() && code[i] == '(') {
        i = pastClosing(code, i);
        if (i == std::string::npos)
            return std::nullopt;
    }
    Lambda lambda;
    lambda.start = at;
    // Specifiers, then an optional trailing return type, up to the body's brace.
    const std::size_t brace = code.find_first_of("{;", i);
    if (brace == std::string::npos || code[brace] != '{')
        return std::nullopt;
    std::string between = code.substr(i, brace - i);
    const std::size_t arrow = between.find("->");
    for (const char* word : { "mutable", "constexpr", "noexcept" })
        if (const std::size_t w = between.find(word);
            w != std::string::npos && (arrow == std::string::npos || w < arrow))
            between.replace(w, std::string(word).size(), std::string(std::string(word).size(), ' '));
    if (arrow != std::string::npos) {
        lambda.returnType = between.substr(arrow + 2);
        lambda.returnType.erase(0, lambda.returnType.find_first_not_of(" \n\t"));
        lambda.returnType.erase(lambda.returnType.find_last_not_of(" \n\t") + 1);
        between.erase(arrow);
    }
    if (between.find_first_not_of(" \n\t") != std::string::npos)
        return std::nullopt; // something else between ] or ) and { : not a lambda
    lambda.bodyBegin = brace + 1;
    const std::size_t end = pastClosing(code, brace);
    if (end == std::string::npos)
        return std::nullopt;
    lambda.bodyEnd = end - 1;
    return lambda;
}

/// Whether `expression` is a test (a comparison or a logical operator at its top level, or a negation).
bool isTest(const std::string& expression)
{
    if (!expression.empty() && expression[0] == '!')
        return true;
    int depth = 0;
    for (std::size_t i = 0; i + 1 < expression.size(); ++i) {
        const char c = expression[i];
        if (c == '(' || c == '[' || c == '{')
            ++depth;
        else if (c == ')' || c == ']' || c == '}')
            --depth;
        else if (depth == 0) {
            const std::string two = expression.substr(i, 2);
            if (two == "==" || two == "!=" || two == "<=" || two == ">=" || two == "&&" || two == "||")
                return true;
        }
    }
    return false;
}

/// Whether `expression` (a return value) builds or is a string.
bool buildsString(const std::string& expression)
{
    if (isTest(expression))
        return false;
    for (const char* token : { "QString", "QLatin1", "QChar", "tr(", ".arg(", "std::string", "to_string(",
                               "toStdString(", "\"\"" })
        if (expression.find(token) != std::string::npos)
            return true;
    // A concatenation: a binary + or % (not ++, +=, or a unary sign).
    for (std::size_t i = 1; i + 1 < expression.size(); ++i) {
        const char c = expression[i];
        if ((c == '+' || c == '%') && expression[i + 1] != '+' && expression[i + 1] != '=' && expression[i - 1] != '+'
            && expression[i - 1] == ' ' && expression[i + 1] == ' ')
            return true;
    }
    return false;
}

struct Offender {
    std::string where; ///< file:line of the lambda
    std::string returned;
};

/// The lambdas of `text` that build a string with a deduced return type.
std::vector<Offender> deducedStringLambdas(const std::string& text, const std::string& shownName)
{
    const std::string code = codeOnly(text);
    std::vector<Lambda> lambdas;
    for (std::size_t at = code.find('['); at != std::string::npos; at = code.find('[', at + 1))
        if (auto lambda = lambdaAt(code, at))
            lambdas.push_back(*lambda);
    std::vector<Offender> found;
    for (const Lambda& lambda : lambdas) {
        if (!lambda.returnType.empty() && lambda.returnType != "auto" && lambda.returnType != "decltype(auto)")
            continue;
        for (std::size_t r = code.find("return", lambda.bodyBegin); r != std::string::npos && r < lambda.bodyEnd;
             r = code.find("return", r + 1)) {
            if (isNameChar(code[r - 1]) || isNameChar(code[r + 6]))
                continue;
            const bool nested = std::any_of(lambdas.begin(), lambdas.end(), [&](const Lambda& inner) {
                return inner.start > lambda.start && inner.bodyBegin <= r && r < inner.bodyEnd;
            });
            if (nested)
                continue;
            std::size_t end = r + 6;
            for (int depth = 0; end < code.size() && !(depth == 0 && code[end] == ';'); ++end)
                depth += (code[end] == '(' || code[end] == '{' || code[end] == '[')
                    - (code[end] == ')' || code[end] == '}' || code[end] == ']');
            std::string expression = code.substr(r + 6, end - r - 6);
            std::replace(expression.begin(), expression.end(), '\n', ' ');
            expression.erase(0, expression.find_first_not_of(' '));
            if (buildsString(expression)) {
                const auto line = std::count(code.begin(), code.begin() + std::ptrdiff_t(lambda.start), '\n') + 1;
                found.push_back({ shownName + ":" + std::to_string(line), expression });
                break;
            }
        }
    }
    return found;
}

} // namespace

class StringLambdas : public QObject {
    Q_OBJECT
private Q_SLOTS:
    /// The detector finds the lambdas that build a string with a deduced type, and only those.
    void detectorFindsDeducedStringLambdas()
    {
        const std::string sample = "void f()\n"
            "{\n"
            "    auto a = [&] { return prefix + name; };                      // 3: a concatenation\n"
            "    auto b = [this](int i) -> QString { return m_name + QString::number(i); };\n"
            "    auto c = [](const QString& s) { return s.startsWith(QLatin1String(\"[x]\")) && s.size() > 2; };\n"
            "    auto d = [&] { return values[i] < values[j]; };\n"
            "    auto e = [] {\n"
            "        std::sort(v.begin(), v.end(), [](int x, int y) { return x < y; });\n"
            "        return QStringLiteral(\"{\") + tr(\"name\");                 // 9: e, not the comparison inside it\n"
            "    };\n"
            "    connect(x, &X::y, this, [this](const QString& t) { label->setText(t); });\n"
            "    auto g = [=]() mutable { return std::to_string(n); };       // 12\n"
            "    auto h = names[0] + names[1];\n"
            "    auto k = [&]() -> auto { return \"a\" % b; };                 // 14\n"
            "    auto m = [&] { return count + 1; };                         // 15: a sum is named too\n"
            "    const char* raw = R\"x(a [&] { return a + b; } b)x\";\n"
            "}\n";
        const auto found = deducedStringLambdas(sample, "sample.cpp");
        std::vector<std::string> where;
        for (const auto& f : found)
            where.push_back(f.where);
        QCOMPARE(where, (std::vector<std::string>{ "sample.cpp:3", "sample.cpp:7", "sample.cpp:12", "sample.cpp:14",
                                                   "sample.cpp:15" }));
        QCOMPARE(found[0].returned, std::string("prefix + name"));
    }

    void everyStringLambdaNamesItsReturnType()
    {
        std::vector<std::string> problems;
        int files = 0;
        for (const char* dir : { "app", "ui" }) {
            for (const auto& entry : fs::recursive_directory_iterator(sourceRoot() / dir)) {
                const std::string ext = entry.path().extension().string();
                if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h"))
                    continue;
                ++files;
                std::ifstream in(entry.path());
                std::stringstream text;
                text << in.rdbuf();
                const std::string shown = fs::relative(entry.path(), sourceRoot()).generic_string();
                for (const Offender& o : deducedStringLambdas(text.str(), shown))
                    problems.push_back(o.where + ": returns " + o.returned);
            }
        }
        QVERIFY2(files > 50, "the source folders were not found");
        for (const auto& p : problems)
            qWarning("%s", p.c_str()); // QVERIFY2 cuts a long message: each on its own line
        const std::string message = std::to_string(problems.size())
            + " lambdas build a string with a deduced return type (above): write -> QString (or -> std::string)";
        QVERIFY2(problems.empty(), message.c_str());
    }
};

QTEST_GUILESS_MAIN(StringLambdas)
#include "tst_string_lambdas.moc"
