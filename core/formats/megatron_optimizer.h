// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The optimizer state in a Megatron torch_dist checkpoint: its keys taken out of the model, the sharding type its
// common state records (param_state_sharding_type), and whether its fp32 master weights can be read back as the
// model (`merge --weights_from optimizer`) — and if not, why, in words a user can act on.

#include "model/checkpoint.h"
#include "pickle/pickle_value.h"

#include <string>

namespace tessera {

/// Moves the canonical (`optimizer.state.*`) and flat-buffer (`optimizer.distributed.*`) keys, `chained_N.`
/// prefixed or not, from `info.tensors` into `info.optimizer`.
void separateMegatronOptimizer(CheckpointInfo& info);

/// The sharding type common.pt's `optimizer` entry records (`param_state_sharding_type`; each chained optimizer's
/// when there are several), else its `content_metadata.distrib_optim_sharding_type`, into `optimizer`.
void readMegatronOptimizerSharding(const PyRef& commonRoot, OptimizerState& optimizer);

/// Why the optimizer's master weights cannot be the model (a reason, without the folder), "" when they can: no
/// optimizer state, a sharding type other than fully_reshardable (named, with the Megatron option that writes a
/// readable one), or canonical state without `fp32_param` for the parameters `modelKeys` and the other states name
/// (listed).
std::string megatronMasterWeightsRefusal(const CheckpointInfo& info, const std::vector<std::string>& modelKeys);

/// The model key of a canonical `fp32_param` key; "" for any other key.
std::string megatronMasterWeightKey(const std::string& name);

} // namespace tessera
