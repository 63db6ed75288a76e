// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A checkpoint's optimizer state as `tessera inspect` shows it: its layout, kinds and counts, Megatron's sharding
// type, whether its master weights can be merged (`--weights_from optimizer`), and the damage in its tensors.

#include "model/checkpoint.h"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace tessera {

/// The `optimizer` object of `inspect --json`; null when the checkpoint holds no optimizer state.
nlohmann::json optimizerToJson(const OptimizerState& optimizer);
/// The summary's "Optimizer" lines; "" when the checkpoint holds no optimizer state.
std::string optimizerSummary(const OptimizerState& optimizer);

} // namespace tessera
