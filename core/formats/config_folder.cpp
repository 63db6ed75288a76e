// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/config_folder.h"

#include "io/confined_file.h"
#include "io/path_kinds.h"
#include "text_util.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// Where links may lead: the folder itself, or for a hub cache snapshot (<repo>/snapshots/<rev>/) the repo folder,
/// whose blobs/ the snapshot's files link to. Returns the root and the folder's path below it.
std::pair<std::string, std::string> confinement(const fs::path& dir)
{
    if (dir.parent_path().filename() == "snapshots" && fs::is_directory(dir.parent_path().parent_path() / "blobs"))
        return { dir.parent_path().parent_path().string(),
                 (fs::path("snapshots") / dir.filename()).string() };
    return { dir.string(), "" };
}

std::string relativeTo(const std::string& below, const std::string& name)
{
    return below.empty() ? name : (fs::path(below) / name).string();
}

} // namespace

bool isHfSideFile(const std::string& name)
{
    if (name.empty() || name[0] == '.')
        return false;
    static const char* exact[] = { "config.json", "generation_config.json", "special_tokens_map.json",
                                   "added_tokens.json", "merges.txt", "tokenizer.model", "spiece.model",
                                   "sentencepiece.bpe.model", "preprocessor_config.json", "processor_config.json",
                                   "video_preprocessor_config.json", "image_processor_config.json",
                                   "feature_extractor_config.json", "chat_template.json", "chat_template.jinja" };
    for (const char* e : exact)
        if (name == e)
            return true;
    if (startsWith(name, "tokenizer") && (endsWith(name, ".json") || endsWith(name, ".model")))
        return true;
    if (startsWith(name, "vocab."))
        return true;
    if (startsWith(name, "chat_template") || startsWith(name, "additional_chat_templates"))
        return true;
    if (endsWith(name, ".tiktoken") || endsWith(name, ".py"))
        return true;
    return false;
}

Result<ConfigFolder> listConfigFolder(const std::string& dir)
{
    ConfigFolder folder;
    if (dir.empty())
        return folder;
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return makeError(dir + ": the config folder does not exist");
    folder.path = dir;
    // Without a trailing separator, so that a hub cache's snapshots/<rev>/ is recognised however it was typed.
    const auto [root, below] = confinement(normalTarget(dir));
    folder.root = root;
    folder.below = below;
    const auto entries = folderEntries(dir, ec);
    if (ec)
        return makeError(dir + ": cannot be listed: " + ec.message());
    for (const auto& entry : entries) {
        const std::string name = entry.path().filename().string();
        if (!isHfSideFile(name))
            continue;
        auto opened = openBeneath(root, relativeTo(below, name));
        if (opened) {
            folder.files.push_back(name);
            continue;
        }
        struct stat st {};
        const bool link = ::lstat(entry.path().c_str(), &st) == 0 && S_ISLNK(st.st_mode);
        folder.skipped.push_back(link ? entry.path().string() + ": a symbolic link that leads out of the config "
                                                                "folder; not used"
                                      : opened.error().message + "; not used");
    }
    std::sort(folder.files.begin(), folder.files.end());
    std::sort(folder.skipped.begin(), folder.skipped.end());
    return folder;
}

bool ConfigFolder::has(const std::string& name) const
{
    return std::find(files.begin(), files.end(), name) != files.end();
}

std::string ConfigFolder::pathOf(const std::string& name) const { return (fs::path(path) / name).string(); }

Result<RegularFile> ConfigFolder::open(const std::string& name) const
{
    if (!has(name))
        return makeError(pathOf(name) + ": not a file of the config folder that can be read");
    return openBeneath(root, relativeTo(below, name));
}

Result<std::string> ConfigFolder::readText(const std::string& name, std::uint64_t maxBytes) const
{
    auto file = open(name);
    TESSERA_TRY(file);
    return readTextFile(*file, pathOf(name), maxBytes);
}

} // namespace tessera
