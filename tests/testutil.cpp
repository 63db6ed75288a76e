// SPDX-License-Identifier: GPL-3.0-or-later
#include "testutil.h"

#include <QDir>
#include <QProcess>
#include <QTemporaryDir>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

namespace tessera::test {

std::string fixturesDir()
{
    if (const char* env = std::getenv("TESSERA_FIXTURES"))
        return env;
    return TESSERA_FIXTURES_DIR;
}

std::string fixture(const std::string& relative) { return fixturesDir() + "/" + relative; }

std::string makeTempDir()
{
    // Kept alive until exit so that every test function can use its own folder.
    static std::vector<std::unique_ptr<QTemporaryDir>> dirs;
    dirs.push_back(std::make_unique<QTemporaryDir>());
    return dirs.back()->path().toStdString();
}

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void writeFile(const std::string& path, const std::string& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string tesseraBinary()
{
    if (const char* env = std::getenv("TESSERA_BINARY"))
        return env;
    return TESSERA_BINARY;
}

QString programName()
{
    return QString::fromStdString(std::filesystem::path(tesseraBinary()).filename().string());
}

bool sampled()
{
    const char* env = std::getenv("TESSERA_TESTS_SAMPLED");
    return env && *env && std::strcmp(env, "0") != 0;
}

int runTessera(const QStringList& args, QString* out, QString* err)
{
    QProcess process;
    process.start(QString::fromStdString(tesseraBinary()), args);
    if (!process.waitForFinished(600000))
        return -1;
    if (out)
        *out = QString::fromUtf8(process.readAllStandardOutput());
    if (err)
        *err = QString::fromUtf8(process.readAllStandardError());
    return process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
}

std::string copyFixtureFolder(const std::string& relative)
{
    namespace fs = std::filesystem;
    const std::string dest = makeTempDir() + "/" + fs::path(relative).filename().string();
    fs::copy(fixture(relative), dest, fs::copy_options::recursive);
    fs::permissions(dest, fs::perms::owner_all, fs::perm_options::add);
    for (const auto& entry : fs::recursive_directory_iterator(dest))
        fs::permissions(entry.path(), entry.is_directory() ? fs::perms::owner_all : fs::perms::owner_write,
                        fs::perm_options::add);
    return dest;
}

float bf16ToFloat(std::uint16_t bits)
{
    const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &wide, 4);
    return f;
}

std::uint16_t floatToBf16(float value)
{
    std::uint32_t bits;
    std::memcpy(&bits, &value, 4);
    return static_cast<std::uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

} // namespace tessera::test
