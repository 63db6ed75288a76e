// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The body of every fuzz target: a plain function that feeds one input to one parser and returns 0. The
// libFuzzer wrapper (libfuzzer_entry.cpp) calls one of them; tests/core/tst_fuzz_replay.cpp calls all of them
// on the seed corpus and on every input that ever made a target fail, in the normal build without libFuzzer.
// A body never checks that parsing succeeded: hostile bytes must give an Error, and the sanitizers, the memory
// limit and the timeout catch everything else.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::fuzz {

int fuzzUnpickler(const std::uint8_t* data, std::size_t size);          ///< unpickle() with torch's allow-list
int fuzzZip(const std::uint8_t* data, std::size_t size);                ///< ZipArchive::open and read of every record
int fuzzTorchSave(const std::uint8_t* data, std::size_t size);          ///< a whole .pt: ZIP, pickle, saved tensors, storage bounds
int fuzzSafetensorsHeader(const std::uint8_t* data, std::size_t size);  ///< readSafetensorsHeader
int fuzzSafetensorsIndex(const std::uint8_t* data, std::size_t size);   ///< model.safetensors.index.json beside a shard
int fuzzDcpMetadata(const std::uint8_t* data, std::size_t size);        ///< a DCP folder's .metadata
int fuzzMegatronDist(const std::uint8_t* data, std::size_t size);       ///< torch_dist's metadata.json or common.pt
int fuzzModelConfig(const std::uint8_t* data, std::size_t size);        ///< transformer_config.json and config.json
int fuzzMappingRules(const std::uint8_t* data, std::size_t size);       ///< a --param_mapping rules file
int fuzzRegex(const std::uint8_t* data, std::size_t size);              ///< a user pattern and a tensor name
int fuzzByteSize(const std::uint8_t* data, std::size_t size);           ///< parseByteSize (--max_shard_size)
int fuzzGguf(const std::uint8_t* data, std::size_t size);               ///< parseGgufHeader (a .gguf file)
int fuzzSentencePiece(const std::uint8_t* data, std::size_t size);      ///< parseSentencePieceModel (tokenizer.model)

using FuzzBody = int (*)(const std::uint8_t*, std::size_t);

struct FuzzTarget {
    const char* name; ///< as in fuzz/corpus/<name>, fuzz/dict/<name>.dict and tests/fuzz_regressions/<name>
    FuzzBody body;
};

/// Every target, in the order fuzz/run.sh runs them.
const std::vector<FuzzTarget>& fuzzTargets();

} // namespace tessera::fuzz
