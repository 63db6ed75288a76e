// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "formats/config_folder.h"
#include "model/dtype.h"
#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// What the merge needs to know from a Hugging Face `config.json`.
struct HfConfigFacts {
    bool found = false;               ///< config.json exists and parses as a JSON object
    bool tieWordEmbeddings = false;   ///< `tie_word_embeddings`; when absent, the family's default (see hf_output.cpp)
    bool tieWordEmbeddingsSet = false;///< the key is present
    std::string torchDtype;           ///< `torch_dtype` (or v5 `dtype`), empty when absent
    std::vector<std::string> architectures;
    /// quantization_config's quant_method ("mxfp4", "fp8"…), "unknown" when it names none; empty without one.
    std::string quantization;
};

/// Reads the folder's `config.json`. No folder, or no usable config.json in it, gives `found == false`; a file
/// that is not valid JSON is an error naming it.
Result<HfConfigFacts> readHfConfig(const ConfigFolder& folder);

/// `config.json` text with every `"torch_dtype"` (and a top-level v5 `"dtype"`) set to `dtype`'s torch name.
/// Only those values change: every other byte of the file stays as it was. When the file has no dtype key,
/// `"torch_dtype"` is added as the last top-level key.
Result<std::string> rewriteConfigDtype(const std::string& configText, DType dtype);

/// How config.json changes on its way into a merged model (or a split's copy of the side files).
struct ConfigEdits {
    std::optional<DType> dtype;     ///< torch_dtype set to this (rewriteConfigDtype)
    bool tieWordEmbeddings = false; ///< tie_word_embeddings set to true (rewriteConfigTied)
    bool dropQuantization = false;  ///< quantization_config removed: the weights are written dequantized
    bool any() const { return dtype || tieWordEmbeddings || dropQuantization; }
};

/// Copies the folder's listed side files (`folder.files`, and nothing else) into `destDir` byte for byte, each
/// read through the folder's confinement and flushed to disk, except config.json when `edits` change it. Errors
/// name the file.
Status copyHfSideFiles(const ConfigFolder& folder, const std::string& destDir, const ConfigEdits& edits);

/// `configText` without its `"quantization_config"` (for weights written unquantized: left there, transformers
/// would look for the quantized tensors). Unchanged when it has none.
Result<std::string> rewriteConfigUnquantized(const std::string& configText);

/// `configText` with `"tie_word_embeddings": true` (key order kept; the file is re-indented as transformers
/// writes it).
Result<std::string> rewriteConfigTied(const std::string& configText);

/// Weight files in `targetDir` that a merged model writing `newFiles` would not replace and that a loader
/// could mistake for part of the new model (*.safetensors, *.safetensors.index.json, pytorch_model*.bin…).
std::vector<std::string> conflictingWeightFiles(const std::string& targetDir, const std::vector<std::string>& newFiles);

/// Config and tokenizer files (isHfSideFile(), remote code aside) in `targetDir` that a merged model writing
/// `newFiles` would not replace: the published folder would pair the new weights with another model's tokenizer,
/// chat template or generation config.
std::vector<std::string> conflictingSideFiles(const std::string& targetDir, const std::vector<std::string>& newFiles);

/// Free bytes on the file system holding `path` (or its nearest existing parent); nullopt when unknown.
std::optional<std::uint64_t> freeDiskBytes(const std::string& path);

} // namespace tessera
