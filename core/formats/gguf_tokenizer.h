// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A Hugging Face tokenizer folder as llama.cpp's tokenizer.ggml.* metadata: byte-level BPE from tokenizer.json
// (`gpt2`), SentencePiece from tokenizer.model (`llama`), special token ids, add_bos/add_eos and the chat template
// from tokenizer_config.json.

#include "formats/config_folder.h"
#include "formats/gguf_file.h"
#include "result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct GgufTokenizer {
    std::vector<GgufKeyValue> metadata; ///< tokenizer.ggml.* and tokenizer.chat_template*, in llama.cpp's order
    std::string model;                  ///< "gpt2" or "llama"
    std::string pre;                    ///< the pre-tokenizer name (gpt2 only)
    std::size_t tokens = 0;             ///< after padding to the model's vocabulary size
    std::string summary;                ///< one line for the plan: "gpt2 (pre gpt-2), 512 tokens, 253 merges, bos 509, eos 510"
    std::vector<std::string> warnings;
    std::vector<std::string> filesRead; ///< the folder's files whose content the metadata carries
};

/// Reads the tokenizer of the config folder (only the files it lists: see ConfigFolder) for a model with `vocabSize` embedding rows (0: unknown): the vocabulary
/// is padded with `[PAD{i}]` tokens (type unused) up to it, as llama.cpp's converter does; a vocabulary larger
/// than the embedding, or a token id past its rows (unknown: past the tokens the file lists), is an error found
/// before the vocabulary is built. `configJson` is config.json's text (for bos/eos ids it may hold), or empty.
/// Errors name the file; a folder with no tokenizer Tessera can convert is an error too (llama.cpp cannot load
/// a model without one).
Result<GgufTokenizer> readGgufTokenizer(const ConfigFolder& folder, std::uint64_t vocabSize,
                                        const std::string& configJson);

/// The llama.cpp pre-tokenizer name for a split regex (`gpt-2`, `llama-bpe`, `qwen2`…), empty when unknown.
std::string ggufPreTokenizerForRegex(const std::string& regex);

/// A minimal SentencePiece model: each piece with its score and type (sentencepiece's numbering: 1 normal,
/// 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte), and the trainer's special ids (-1 when unset).
struct SentencePieceModel {
    struct Piece {
        std::string text;
        float score = 0;
        int type = 1;
    };
    std::vector<Piece> pieces;
    int modelType = 1; ///< 1 unigram, 2 BPE, 3 word, 4 char
    int unkId = 0, bosId = 1, eosId = 2, padId = -1;
    bool addDummyPrefix = true;
};

/// Parses a SentencePiece `tokenizer.model` (a ModelProto protobuf) without the protobuf library. More than
/// `maxPieces` pieces (the embedding's rows) or an empty piece is an error, found before the next piece is kept.
Result<SentencePieceModel> parseSentencePieceModel(const std::string& bytes, std::size_t maxPieces);

} // namespace tessera
