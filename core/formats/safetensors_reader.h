// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "model/dtype.h"
#include "io/mapped_file.h"
#include "result.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

/// One tensor entry of a safetensors header.
struct SafetensorsTensor {
    std::string name;
    DType dtype = DType::Unknown;
    Shape shape;
    std::uint64_t begin = 0; ///< absolute byte offset of the first byte in the file
    std::uint64_t end = 0; ///< absolute byte offset one past the last byte
};

/// The validated header of one safetensors file.
struct SafetensorsHeader {
    std::string path; ///< the file it was read from (as given)
    std::vector<SafetensorsTensor> tensors; ///< in the order the header's JSON lists them
    std::map<std::string, std::string> metadata; ///< `__metadata__`, empty when absent
    std::uint64_t dataStart = 0; ///< 8 + headerLength: where tensor data begins
    std::uint64_t headerLength = 0; ///< N, the JSON length (including its space padding)
};

/// The largest header the reference implementation accepts (`MAX_HEADER_SIZE`).
inline constexpr std::uint64_t kSafetensorsMaxHeaderSize = 100'000'000;

/// Parses and validates a whole safetensors file held in `bytes`, exactly as the reference
/// implementation does (`SafeTensors::read_metadata`): header length bounds, UTF-8, a JSON object whose
/// entries have dtype/shape/data_offsets, string-only metadata, offsets contiguous from 0 without gap or
/// overlap, sizes that match shape × dtype without overflow, and no bytes after the last tensor.
/// Stricter than the reference on two points: duplicate JSON keys and sub-byte dtypes (F4, F6_*) are errors.
/// Every error message starts with `path: `.
Result<SafetensorsHeader> readSafetensorsHeader(const ByteView& bytes, const std::string& path);

/// Maps `path` read-only and validates it with readSafetensorsHeader().
Result<SafetensorsHeader> readSafetensorsFile(const std::string& path);

/// Describes a Hugging Face safetensors model as a CheckpointInfo with layout "hf-safetensors".
///
/// `dirOrFile` may be one `*.safetensors` file, a `*.safetensors.index.json` file, or a folder holding
/// `model.safetensors`, `model.safetensors.index.json` or exactly one `*.safetensors` file (checked in
/// that order, as transformers does). With an index, shards that are missing or unreadable and tensors
/// that are missing, unlisted or in another shard than the index says become Problems naming the file;
/// the readable tensors are still listed. Fails outright only when there is nothing to read.
Result<CheckpointInfo> scanSafetensorsFolder(const std::string& dirOrFile);

/// Index of the first byte of `text` that is not part of valid UTF-8 (RFC 3629: no overlong forms,
/// no surrogates, nothing above U+10FFFF), or std::string_view::npos when all of it is valid.
std::size_t findInvalidUtf8(std::string_view text);

/// "[3,4]" — shapes as safetensors headers spell them, for messages.
std::string formatShape(const Shape& shape);

} // namespace tessera
