// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "model/placement.h"
#include "pickle/pickle_value.h"
#include "pickle/torch_save.h"
#include "result.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

/// One value of a state dict to save: a plain tensor, or a DTensor whose local shard is `shape`.
struct TorchSaveTensor {
    std::string name;
    DType dtype = DType::BFloat16;
    Shape shape;                        ///< the stored (local) tensor's shape; written contiguous
    /// Elements of the storage behind it (0 = exactly the tensor's): FSDP2 keeps each local shard in a storage
    /// padded to the shard size of the first rank, and torch.save writes the whole storage.
    std::uint64_t storageElements = 0;
    bool dtensor = false;
    Shape globalShape;                  ///< DTensor only
    std::vector<Placement> placements;  ///< DTensor only, one per mesh dim
    DeviceMesh mesh;                    ///< DTensor only: shape, dim names, row-major ranks
    Shape coordinate;                   ///< DTensor only: this file's mesh coordinate

    std::uint64_t storageBytes() const;
};

/// Supplies `bytes` bytes of tensor `index`'s data starting at byte `offset` (little-endian elements).
using TorchSaveFill = std::function<Status(std::size_t index, std::uint64_t offset, std::uint8_t* dst, std::uint64_t bytes)>;

/// Writes one torch.save archive the way torch 2.6 does, storage by storage: a stored (uncompressed) ZIP, ZIP64
/// when large, whose records live under one folder name — `data.pkl` (pickle protocol 2; DTensors as
/// `_rebuild_from_type_v2` + `_rebuild_wrapper_subclass` with the DTensorSpec and DeviceMesh state torch 2.6
/// pickles, one DeviceMesh object shared by the tensors on it), `byteorder`, `data/<k>` storages 64-byte aligned
/// through the "FB" padding extra field, `version` = "3\n" and `.data/serialization_id`.
///
/// The pickle is complete before any data, so storages can be appended in any order (torch.load finds records
/// through the central directory), each fed in chunks: an archive larger than memory is written without
/// holding more than a chunk. Writes into an open stream at its current position, so several archives can
/// follow each other in one file (DCP's .distcp files).
class TorchSaveWriter {
public:
    /// The whole value saved: an ordered state dict of `tensors` (torch.save(model.state_dict())), a list of
    /// state dicts (verl's Megatron model.pt: one per virtual pipeline stage, `listChunks` tensors each), a dict
    /// holding the state dicts under `chunkKeys` beside other items (Megatron-LM's model_optim_rng.pt:
    /// {"args": …, "iteration": …, "model" or "model0", "model1", …}; `rootItems` is the pickle of those other
    /// key/value pairs, without a MARK), a single bare tensor (torch.save(tensor), as DCP saves each item), or any
    /// tree of dicts, lists, tuples and scalars (an optimizer's state dict) given as `tree`, whose tensors are
    /// placeholders: PyValue Tensor values without a TensorRef whose `integer` is the index in `tensors`, met in
    /// the order 0, 1, 2, … (the order torch assigns storage keys in).
    enum class Value { StateDict, StateDictList, StateDictsInDict, BareTensor, Tree };

    /// Starts an archive on `file` (not owned; `path` names it in messages) under `archiveName`
    /// (torch uses the file's stem, or "archive" for a stream) and writes its pickle.
    static Result<std::unique_ptr<TorchSaveWriter>> begin(std::FILE* file, const std::string& path,
                                                          const std::string& archiveName,
                                                          const std::vector<TorchSaveTensor>& tensors,
                                                          Value value = Value::StateDict,
                                                          const std::vector<std::size_t>& listChunks = {},
                                                          const std::vector<std::string>& chunkKeys = {},
                                                          const std::string& rootItems = {},
                                                          const PyValue* tree = nullptr);
    ~TorchSaveWriter();
    TorchSaveWriter(const TorchSaveWriter&) = delete;
    TorchSaveWriter& operator=(const TorchSaveWriter&) = delete;

    /// Starts the storage of tensor `index` (TorchSaveTensor::storageBytes() bytes follow through append()).
    Status beginStorage(std::size_t index);
    Status append(const void* bytes, std::uint64_t n);
    /// Appends `n` zero bytes (a padded storage's tail).
    Status appendZeros(std::uint64_t n);
    /// Ends the storage begun last; refuses one that did not receive exactly its bytes.
    Status endStorage();
    /// Writes what is left (device mesh storages, version, serialization id, central directory). Every tensor's
    /// storage must have been written. Returns the archive's size in bytes.
    Result<std::uint64_t> finish();

private:
    TorchSaveWriter() = default;
    struct State;
    std::unique_ptr<State> m;
};

/// Writes a torch.save archive of a value without tensors, given as its pickle (protocol 2), into `path`, flushed
/// to disk: e.g. Megatron's common.pt ({"checkpoint_version": 3.0, "iteration": N}).
Status writeTorchSavePickle(const std::string& path, const std::string& archiveName, const std::string& pickle);

/// Writes the records of the archive `source` (each checked against its CRC-32 on the way) into a new file `path`
/// (created exclusively, never through a link, flushed to disk) under the folder name `archiveName`: the same value
/// as torch.load reads it, saved as if under another file name (verl's extra_state_world_size_W_rank_R.pt for
/// another W). No pickle is read or rewritten.
Status writeRenamedTorchSave(const TorchSaveFile& source, const std::string& path, const std::string& archiveName);
/// Writes `tensors` as an ordered state dict into the file `path` (through `path.tmp`, renamed when complete),
/// loadable by `torch.load` (torch ≥ 1.6). Data is streamed through `fill` in chunks, so checkpoints larger than
/// memory can be written.
Status writeTorchSave(const std::string& path, const std::vector<TorchSaveTensor>& tensors, const TorchSaveFill& fill);

} // namespace tessera
