// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "model/dtype.h"
#include "result.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

/// A tensor to be written: its bytes are supplied separately.
struct SafetensorsEntry {
    std::string name;
    DType dtype = DType::Unknown;
    Shape shape;
};

/// Where everything goes in a safetensors file, byte for byte as the reference library lays it out.
struct SafetensorsLayout {
    std::string header; ///< the bytes at [0, dataStart): 8-byte length, JSON, space padding
    std::vector<std::uint64_t> dataOffsets; ///< absolute file offset per input entry, in input order
    std::vector<std::uint64_t> byteSizes; ///< bytes per input entry, in input order
    std::uint64_t fileSize = 0;
};

/// Lays out a safetensors file exactly like the reference `safetensors` library (`prepare()`): tensors sorted by
/// descending dtype (the library's enum order, i.e. alignment) then by name, contiguous offsets, compact JSON with
/// `__metadata__` first, then the tensors in offset order with keys dtype, shape, data_offsets, padded with spaces
/// to a multiple of 8. An empty `metadata` writes no `__metadata__` (Python's `metadata=None`). With several
/// metadata keys the library's order is a random HashMap order; we write them sorted.
/// Errors: duplicate or invalid (non-UTF-8, "__metadata__") names, negative dims, dtypes safetensors cannot
/// store, sizes overflowing 64 bits, a header above 100,000,000 bytes.
Result<SafetensorsLayout> planSafetensorsFile(
    const std::vector<SafetensorsEntry>& entries, const std::map<std::string, std::string>& metadata);

/// Whether a safetensors header can hold a tensor named `name` (valid UTF-8, not "__metadata__"); the error says
/// why, quoting the name escaped. Planners check names with it first, to name the file a bad one was read from.
Status checkSafetensorsTensorName(const std::string& name);

/// Groups tensors into shards the way Hugging Face does (`split_state_dict_into_shards_factory`): in the given
/// order, a new shard starts when the current one is not empty and `current + size > maxShardSize`. A tensor
/// larger than the maximum gets a shard of its own, appended at once while the current shard keeps filling —
/// so it can come before tensors that precede it, exactly as in huggingface_hub. Returns indices into `sizes`.
std::vector<std::vector<std::size_t>> splitIntoShards(
    const std::vector<std::uint64_t>& sizes, std::uint64_t maxShardSize);

/// "model-00001-of-00003.safetensors" for index0 = 0, count = 3; "model.safetensors" when count == 1.
std::string shardFileName(std::size_t index0, std::size_t count);

/// `model.safetensors.index.json` as transformers writes it: `json.dumps(index, indent=2, sort_keys=True) + "\n"`
/// with `{"metadata": {"total_size": N}, "weight_map": {tensor: file}}` (Python's default ensure_ascii escaping).
/// On a repeated tensor name the last entry wins, like a Python dict.
std::string makeShardIndexJson(
    std::uint64_t totalSize, const std::vector<std::pair<std::string, std::string>>& weightMap);

/// Fills the `bytes` bytes of entry `index` (input order) at `dst`.
using SafetensorsFill = std::function<Status(std::size_t index, std::uint8_t* dst, std::uint64_t bytes)>;

/// Writes a complete safetensors file: plans it, then calls `fill` once per tensor in file order and writes the
/// bytes. The file is written under a temporary name next to `path`, flushed to disk and renamed at the end, so a
/// failure or a crash never leaves a half-written `path`. Meant for tests and small outputs (each tensor is buffered once in memory).
Status writeSafetensorsFile(const std::string& path, const std::vector<SafetensorsEntry>& entries,
    const std::map<std::string, std::string>& metadata, const SafetensorsFill& fill);

} // namespace tessera
