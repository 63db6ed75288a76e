// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "pickle/pickle_value.h"
#include "model/placement.h"
#include "result.h"
#include "pickle/torch_save.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// One value of a saved state dict, understood: a plain tensor, a DTensor shard, or ShardedTensor shards.
struct SavedTensor {
    enum class Kind { Plain, DTensor, ShardedTensor };
    Kind kind = Kind::Plain;
    DType dtype = DType::Unknown;
    Shape globalShape;
    TensorRef local;                       ///< Plain and DTensor: the data this file holds

    // DTensor
    std::vector<Placement> placements;
    DeviceMesh mesh;
    Shape coordinate;                      ///< this file's coordinate in the mesh; empty when not recorded

    // ShardedTensor
    struct Shard {
        TensorRef tensor;
        Shape offsets;
    };
    std::vector<Shard> shards;             ///< the local shards with their global offsets
    std::vector<std::pair<Shape, Shape>> allShardBoxes; ///< (offsets, sizes) of every rank's shard, from metadata
};

/// Interprets `value` read from `file`. Returns nullopt for values that are not tensors (ints, strings, inert
/// objects such as Transformer Engine `_extra_state`), an error for tensors Tessera cannot read (quantized,
/// sparse, nested, meta) that names the kind.
Result<std::optional<SavedTensor>> interpretSavedTensor(const PyRef& value, const TorchSaveFile& file);

/// The (name, value) pairs of a state dict, in order. Nested dicts are flattened with '.' only when
/// `flatten` is set (Megatron's `model` sub-dicts); verl state dicts are flat already.
std::vector<std::pair<std::string, PyRef>> stateDictItems(const PyRef& dict);

/// "(Replicate(), Shard(0)) on ddp=2 × fsdp=2" style text for a DTensor.
std::string describeSavedPlacement(const SavedTensor& tensor);

} // namespace tessera
