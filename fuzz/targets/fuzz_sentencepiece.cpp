// SPDX-License-Identifier: GPL-3.0-or-later
// A SentencePiece tokenizer.model (a ModelProto protobuf), read without the protobuf library for GGUF export.

#include "fuzz_targets.h"

#include "formats/gguf_tokenizer.h"

#include <string>

namespace tessera::fuzz {

int fuzzSentencePiece(const std::uint8_t* data, std::size_t size)
{
    (void)parseSentencePieceModel(std::string(reinterpret_cast<const char*>(data), size));
    return 0;
}

} // namespace tessera::fuzz
