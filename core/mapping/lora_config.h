// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A LoRA adapter's hyper-parameters as files record them (PEFT's adapter_config.json, verl's lora_train_meta.json):
// every key read with the JSON type PEFT writes it in. A value of another type is refused, never guessed: PEFT
// reads "use_rslora": "false" as true (a non-empty string) and cannot divide by "lora_alpha": "16", so neither
// has one meaning to take. A key that changes how the update is applied and that the fuse does not do (DoRA, some
// layers only, per-module ranks …) is refused by name rather than ignored.

#include "result.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

/// The largest LoRA alpha accepted, from --lora_alpha or a file: real ones are at most a few thousand, and
/// alpha / r multiplies every update, so a larger one only turns the fused weights into infinities.
inline constexpr double kMaxLoraAlpha = 1e9;

/// Empty when `alpha` is a usable LoRA alpha (finite, positive, at most kMaxLoraAlpha); else what is wrong with it.
std::string loraAlphaProblem(double alpha);

/// What one adapter_config.json or lora_train_meta.json says.
struct LoraConfigFile {
    std::optional<double> alpha;       ///< "lora_alpha"
    std::optional<std::int64_t> r;     ///< "r"
    std::optional<bool> useRslora;     ///< "use_rslora"
    std::string taskType;              ///< "task_type"
};

/// Reads the JSON object `object` of `file`. Errors name the file and the key: a key whose value is not of its JSON
/// type (a number or a boolean given as a string), an alpha out of range, and the keys of features the fuse does not
/// support (use_dora, layers_to_transform, layers_pattern, rank_pattern and alpha_pattern when not empty,
/// fan_in_fan_out, lora_bias, a bias other than "none", layer_replication, target_parameters,
/// trainable_token_indices, use_qalora, a peft_type other than LORA).
Result<LoraConfigFile> readLoraConfigObject(const nlohmann::json& object, const std::string& file);

} // namespace tessera
