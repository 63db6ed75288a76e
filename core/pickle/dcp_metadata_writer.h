// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "pickle/pickle_value.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// One saved chunk of a tensor in a DCP folder: its box and where its torch.save archive lies.
struct DcpChunkRecord {
    Shape offsets;
    Shape sizes;
    std::string file;            ///< relative path ("__0_0.distcp")
    std::uint64_t offset = 0;    ///< the archive's first byte in that file
    std::uint64_t length = 0;    ///< its length
};

/// One tensor of a DCP checkpoint; its chunks in the order torch's planner numbers them (rank order).
struct DcpTensorRecord {
    std::string fqn;
    DType dtype = DType::Unknown;
    Shape size;
    std::vector<DcpChunkRecord> chunks;
    /// Its planner_data path (the keys of the nested state dict it was flattened from, a tuple of str and int), as
    /// a source recorded it; null = (fqn,).
    PyRef plannerPath;
};

/// One non-tensor entry (BytesStorageMetadata): a pickled object's bytes saved as they are.
struct DcpBytesRecord {
    std::string fqn;
    std::string file;            ///< relative path
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    PyRef plannerPath;           ///< null = (fqn,)
};

/// The `.metadata` pickle torch.distributed.checkpoint 2.6 writes and `dcp.load`/`dcp_to_torch_save` read:
/// a Metadata with state_dict_metadata (TensorStorageMetadata: properties, size, chunks), planner_data (each fqn's
/// own path), storage_data (MetadataIndex(fqn, offset, index) → _StorageInfo(relative_path, offset, length)) and
/// storage_meta (a save id).
std::string dcpMetadataPickle(const std::vector<DcpTensorRecord>& tensors, const std::string& saveId,
                              const std::vector<DcpBytesRecord>& bytes = {});

} // namespace tessera
