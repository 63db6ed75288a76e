// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "progress.h"

#include <QString>
#include <QStringList>
#include <QTest>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace tessera::test {

/// Folder of the shared fixtures (TESSERA_FIXTURES overrides the configured path).
std::string fixturesDir();
/// fixturesDir() + "/" + relative.
std::string fixture(const std::string& relative);
/// A fresh temporary folder removed at exit.
std::string makeTempDir();
/// A writable copy of the fixture folder `relative` in a fresh temporary folder (the shared fixtures may be
/// read-only); returns the copy's path.
std::string copyFixtureFolder(const std::string& relative);
/// Whole file as bytes (for small test files only).
std::string readFile(const std::string& path);
void writeFile(const std::string& path, const std::string& bytes);
/// Path of the executable the command-line tests run: the built workbench `tessera`, or `tessera-cli` in a build
/// without the workbench (TESSERA_BUILD_GUI=OFF); TESSERA_BINARY overrides it.
std::string tesseraBinary();
/// How that program names itself in what it prints ("tessera" or "tessera-cli"): its file name.
QString programName();
/// Whether this build has the workbench executable (TESSERA_BUILD_GUI).
constexpr bool kWorkbenchBuilt = TESSERA_WORKBENCH_BUILT;
/// True under the sanitizer preset (TESSERA_TESTS_SAMPLED set): the long matrices that repeat one code path over
/// many inputs (every fixture merged in parts, thousands of mutations) run a sample of their rows there, since a
/// sanitized process is ten times slower; the dev preset runs them whole.
bool sampled();
/// One command-line argument, from a literal or a QString (the project forbids implicit ASCII casts).
struct Arg {
    QString s;
    Arg(const char* text) : s(QString::fromUtf8(text)) { }
    Arg(const QString& text) : s(text) { }
    Arg(const std::string& text) : s(QString::fromStdString(text)) { }
};
/// A command line from literals, QStrings and std::strings.
inline QStringList A(std::initializer_list<Arg> items)
{
    QStringList list;
    for (const auto& a : items)
        list << a.s;
    return list;
}

/// Runs `tessera args…`, returns its exit code and fills stdout/stderr.
int runTessera(const QStringList& args, QString* out = nullptr, QString* err = nullptr);

/// bfloat16 bits to float, exactly.
float bf16ToFloat(std::uint16_t bits);
/// float to bfloat16 bits, rounded to nearest even as torch does (finite values).
std::uint16_t floatToBf16(float value);

/// A Progress that asks to cancel once it has been told of any progress: a run stopped partway through.
class CancelAfterFirstReport final : public Progress {
public:
    void report(std::uint64_t, std::uint64_t, const std::string&) override { m_reported = true; }
    bool isCanceled() const override { return m_reported.load(); }

private:
    std::atomic<bool> m_reported { false };
};

} // namespace tessera::test

/// QVERIFY for a tessera::Result / Status that prints the error message on failure.
#define QVERIFY_RESULT(expr)                                                                                         \
    do {                                                                                                             \
        const auto& tesseraResult_ = (expr);                                                                         \
        if (!tesseraResult_)                                                                                         \
            QFAIL(qPrintable(QString::fromStdString(tesseraResult_.error().message)));                              \
    } while (0)
