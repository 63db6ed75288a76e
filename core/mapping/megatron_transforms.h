// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A mapping rule's transform applied to one source tensor: the boxes of its targets (the fused QKV split per query
// group, [gate; up] halves, vocabulary padding dropped, per-head rows reordered, an expert laid into its stack), and
// a Megatron LoRA factor under PEFT's names. Only boxes move, never values. Internal to megatron_mapping.cpp.

#include "formats/megatron_names.h"
#include "mapping/megatron_rule_patterns.h"
#include "model/checkpoint.h"
#include "result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::mapping_internal {

/// A source tensor after unstacking: what the rules see.
struct Item {
    std::string name;          ///< Megatron per-layer name the rules match
    TensorInfo tensor;
    std::string label;         ///< "decoder.layers.mlp.linear_fc1.weight[2]"
    Shape sourceShape;
    std::string chain;         ///< "unstack_layers" or empty
};

/// One target a transform makes of an item.
struct Output {
    std::string name;
    TensorInfo tensor;
    std::int64_t stackEntry = -1; ///< stack_experts: the entry of the target's expert axis it fills
};

/// When one dim is a whole multiple off, the tensor-parallel size is the usual suspect: a hint saying so ("; 64 is
/// 1/2 of 128, as a wrong tensor-parallel size would give …"), or empty.
std::string tpHint(std::int64_t actual, std::int64_t expected, const CheckpointInfo& source);

/// Applies a rule's transform; an error message when it cannot apply to this tensor.
Result<std::vector<Output>> applyTransform(const CompiledRule& rule, const Item& item, const Captures& captures,
                                           const ConfigVars& vars, const CheckpointInfo& source,
                                           std::vector<std::string>& warnings);

/// A Megatron LoRA factor under Hugging Face's PEFT names. B's rows are laid out like the adapted weight's
/// (a ColumnParallelLinear over the same outputs), so the weight's rule re-indexes it the same way (QKV per query
/// group, [gate; up] halves); A multiplies the input of every output the weight is split into, so each target
/// gets the same A (q, k and v share one; so do gate and up).
Result<std::vector<Output>> mapLoraFactor(const CompiledRule& rule, const Item& item, const MegatronAdapterName& adapter,
                                          const Captures& captures, const ConfigVars& vars, const CheckpointInfo& source,
                                          std::vector<std::string>& warnings);

} // namespace tessera::mapping_internal
