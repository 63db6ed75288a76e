// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Optimizer state kept in the same archive as a model: its keys as each layout names them, and the step that takes
// its tensors out of the model (into CheckpointInfo::optimizer) so that a merge writes exactly the model.

#include "model/checkpoint.h"

#include <optional>
#include <string>

namespace tessera {

/// One optimizer tensor's key read: which state of which parameter.
struct OptimizerKey {
    std::string kind;  ///< "exp_avg", "exp_avg_sq", "fp32_param", "step"; a flat buffer's "param", "exp_avg", …
    std::string param; ///< the parameter's model key; "" for a flat buffer, which holds many
};

/// Megatron's canonical optimizer keys (the `fully_reshardable` format and plain optimizers):
/// `[chained_N.]optimizer.state.<kind>.<model key>`.
std::optional<OptimizerKey> megatronCanonicalOptimizerKey(const std::string& name);
/// The distributed optimizer's own buffers (`dp_reshardable` and deprecated types):
/// `[chained_N.]optimizer.distributed.…`, the state kind last.
std::optional<OptimizerKey> megatronFlatOptimizerKey(const std::string& name);
/// torch's flatten_optimizer_state_dict as torchtitan saves it under `optimizer`: `optimizer.state.<fqn>.<kind>`.
std::optional<OptimizerKey> torchFlattenedOptimizerKey(const std::string& name);

/// The entry of torchtitan's training state (`optimizer`, `lr_scheduler`, `dataloader`, `train_state`: the names
/// its CheckpointManager saves beside the model's keys) that `name` belongs to; "" for any other key.
std::string torchtitanStateEntry(const std::string& name);

using OptimizerKeyReader = std::optional<OptimizerKey> (*)(const std::string& name);

/// Moves every tensor of `info` that `keyOf` reads as an optimizer key, and its problems, into `info.optimizer`
/// (whose layout becomes `layout` when one moves), counting its kinds and parameters. Returns how many moved.
std::size_t moveOptimizerTensors(CheckpointInfo& info, OptimizerState::Layout layout, OptimizerKeyReader keyOf);

} // namespace tessera
