// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "model/placement.h"
#include "result.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera {

/// One value of a state dict to save: a plain tensor, or a DTensor whose local shard is `shape`.
struct TorchSaveTensor {
    std::string name;
    DType dtype = DType::BFloat16;
    Shape shape;                        ///< the stored (local) tensor's shape; written contiguous
    bool dtensor = false;
    Shape globalShape;                  ///< DTensor only
    std::vector<Placement> placements;  ///< DTensor only, one per mesh dim
    DeviceMesh mesh;                    ///< DTensor only: shape, dim names, row-major ranks
    Shape coordinate;                   ///< DTensor only: this file's mesh coordinate
};

/// Supplies `bytes` bytes of tensor `index`'s data starting at byte `offset` (little-endian elements).
using TorchSaveFill = std::function<Status(std::size_t index, std::uint64_t offset, std::uint8_t* dst, std::uint64_t bytes)>;

/// Writes `tensors` as an ordered state dict in torch.save's zip format, loadable by `torch.load` (torch ≥ 1.6):
/// a stored (uncompressed) ZIP, ZIP64 when large, whose records live under `<file stem>/` — `data.pkl`
/// (pickle protocol 2, DTensors as `_rebuild_from_type_v2` + `_rebuild_wrapper_subclass` like torch 2.x),
/// `byteorder`, `data/<k>` storages 64-byte aligned through the "FB" padding extra field, and `version` = "3\n".
/// Data is streamed through `fill` in chunks, so checkpoints larger than memory can be written.
Status writeTorchSave(const std::string& path, const std::vector<TorchSaveTensor>& tensors, const TorchSaveFill& fill);

} // namespace tessera
