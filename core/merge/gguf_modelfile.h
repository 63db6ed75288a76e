// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The Modelfile written beside every GGUF export, so `ollama create NAME -f Modelfile` takes the folder as it is:
// `FROM ./<file>.gguf` and one `PARAMETER stop` per end-of-sequence token. No TEMPLATE: Ollama reads the chat
// template from the file's tokenizer.chat_template.

#include "formats/config_folder.h"
#include "formats/gguf_file.h"

#include <string>
#include <vector>

namespace tessera {

inline constexpr const char* kModelfileName = "Modelfile";

struct GgufModelfile {
    std::string text;
    std::vector<std::string> warnings; ///< a stop token that is an ordinary piece of text, an id with no token
};

/// The Modelfile for `ggufFileName`: the stop tokens are generation_config.json's eos_token_id (one id or a list)
/// when the config folder has one, else the tokenizer's eos (tokenizer.ggml.eos_token_id), each written as its
/// text in the file's vocabulary (tokenizer.ggml.tokens). Ids outside the vocabulary are left out with a warning,
/// and so is a warning given for a stop token that is not a special token (it would end replies on ordinary text).
GgufModelfile ggufModelfile(const std::string& ggufFileName, const ConfigFolder& config,
                            const std::vector<GgufKeyValue>& metadata);

} // namespace tessera
