// SPDX-License-Identifier: GPL-3.0-or-later
#include "scratch_folder.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace tessera::fuzz {

namespace {

struct Scratch {
    std::string path;
    Scratch()
    {
        std::error_code ec;
        std::string pattern = (fs::temp_directory_path(ec) / "tessera-fuzz-XXXXXX").string();
        if (ec || !mkdtemp(pattern.data())) {
            std::perror("tessera fuzz: cannot create a scratch folder");
            std::abort();
        }
        path = pattern;
    }
    ~Scratch()
    {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

} // namespace

const std::string& scratchFolder()
{
    static Scratch scratch;
    return scratch.path;
}

std::string writeScratchFile(const std::string& name, const std::uint8_t* data, std::size_t size)
{
    const fs::path target = fs::path(scratchFolder()) / name;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    const std::string path = target.string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) {
        std::fprintf(stderr, "tessera fuzz: cannot write %s\n", path.c_str());
        std::abort();
    }
    return path;
}

std::string writeScratchFile(const std::string& name, const std::string& bytes)
{
    return writeScratchFile(name, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

void removeScratchFile(const std::string& name)
{
    std::error_code ec;
    fs::remove(fs::path(scratchFolder()) / name, ec);
}

} // namespace tessera::fuzz
