// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A model's config and tokenizer folder (verl's huggingface/, --hf_model_path, a Hugging Face folder): the files
// Tessera reads from it (config.json, the tokenizer for a GGUF file) and carries into what it writes. Listed once,
// by listConfigFolder(); every reader and every writer uses that list and reads through it, so the files a plan
// shows as copied are exactly the files copied, and a file the plan leaves out is never opened.

#include "io/regular_file.h"
#include "io/text_file.h"
#include "result.h"

#include <string>
#include <vector>

namespace tessera {

struct ConfigFolder {
    std::string path;                 ///< the folder; empty when there is none
    std::string root;                 ///< where reads are confined: the folder, or a hub cache's repo folder
    std::string below;                ///< the folder's path inside `root` ("" or "snapshots/<rev>")
    std::vector<std::string> files;   ///< side files that can be read (regular files inside `root`), sorted
    std::vector<std::string> skipped; ///< one line per side file that is not used, and why (for the plan's warnings)

    bool empty() const { return path.empty(); }
    bool has(const std::string& name) const;
    /// Opens a listed file, confined to `root` as it was when listed; an error for a name not listed.
    Result<RegularFile> open(const std::string& name) const;
    /// The text of a listed file (see readTextFile()).
    Result<std::string> readText(const std::string& name, std::uint64_t maxBytes = kMaxTextFileBytes) const;
    /// `path/name`, for messages.
    std::string pathOf(const std::string& name) const;
};

/// True for the files of a config folder that belong in a model: config.json, generation_config.json, tokenizer
/// files (tokenizer*.json, tokenizer.model, vocab.*, merges.txt, special_tokens_map.json, added_tokens.json,
/// *.tiktoken, spiece.model…), chat templates, processor configs and remote-code `*.py`. Weights and anything else
/// are not carried over.
bool isHfSideFile(const std::string& fileName);

/// Lists the side files of `dir` (empty `dir`: no folder). A side file is used when it is a regular file inside
/// the folder, or a symbolic link that stays inside it (or, in a Hugging Face hub cache, leads from snapshots/<rev>/
/// into the repo's blobs/); a link that leads anywhere else, and a name that is not a regular file (a FIFO, a
/// folder), are listed in `skipped` and never opened. An error when `dir` is not a folder.
Result<ConfigFolder> listConfigFolder(const std::string& dir);

} // namespace tessera
