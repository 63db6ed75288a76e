// SPDX-License-Identifier: GPL-3.0-or-later
// A SentencePiece tokenizer.model (a ModelProto protobuf), read without the protobuf library for GGUF export.

#include "fuzz_targets.h"

#include "formats/gguf_tokenizer.h"

#include <string>

namespace tessera::fuzz {

int fuzzSentencePiece(const std::uint8_t* data, std::size_t size)
{
    // The export passes the embedding's rows; a million is past every real vocabulary (Gemma's 262,144).
    (void)parseSentencePieceModel(std::string(reinterpret_cast<const char*>(data), size), 1u << 20);
    return 0;
}

} // namespace tessera::fuzz
