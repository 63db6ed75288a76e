// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What a Megatron checkpoint says about how it was trained: parallel sizes, layer split and model sizes, from
// verl's transformer_config.json or Megatron-LM's pickled `args`. Every field is optional because each source
// records a different subset, and a reader must never guess a size nothing records.

#include "model/checkpoint.h"
#include "pickle/pickle_value.h"
#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// One optional integer setting together with where it came from (for messages).
struct MegatronSetting {
    std::optional<std::int64_t> value;
    std::string source; ///< "transformer_config.json", "args in mp_rank_00/model_optim_rng.pt", …
    explicit operator bool() const { return value.has_value(); }
    std::int64_t operator*() const { return *value; }
    /// "tensor_model_parallel_size 2 (transformer_config.json)"
    std::string describe(const std::string& key) const;
};

/// The settings Tessera uses, named as in Megatron's TransformerConfig.
struct MegatronConfig {
    MegatronSetting tensorParallel;        ///< tensor_model_parallel_size
    MegatronSetting pipelineParallel;      ///< pipeline_model_parallel_size
    MegatronSetting virtualPipeline;       ///< virtual_pipeline_model_parallel_size (null/absent → not used)
    MegatronSetting expertParallel;        ///< expert_model_parallel_size
    MegatronSetting expertTensorParallel;  ///< expert_tensor_parallel_size (defaults to TP in Megatron)
    MegatronSetting numLayers;             ///< num_layers
    MegatronSetting firstStageLayers;      ///< num_layers_in_first_pipeline_stage
    MegatronSetting lastStageLayers;       ///< num_layers_in_last_pipeline_stage
    MegatronSetting numExperts;            ///< num_moe_experts (args: num_experts)
    MegatronSetting gatedLinearUnit;       ///< gated_linear_unit (args: swiglu), 0 or 1
    MegatronSetting hiddenSize;            ///< hidden_size
    MegatronSetting ffnHiddenSize;         ///< ffn_hidden_size
    MegatronSetting numAttentionHeads;     ///< num_attention_heads
    MegatronSetting numQueryGroups;        ///< num_query_groups (null → num_attention_heads)
    MegatronSetting kvChannels;            ///< kv_channels (head dim)
    std::vector<std::string> sources;      ///< the files the settings were read from
    std::vector<std::string> problems;     ///< settings refused as out of range (args), for the reader to report

    /// Fills every unset field from `other`; returns one message per field both set to different values.
    std::vector<std::string> mergeFrom(const MegatronConfig& other);
};

/// The nearest transformer_config.json in `dir` or up to two folders above it (verl writes it in actor/, beside
/// model/ or dist_ckpt/); empty when there is none.
std::string findTransformerConfig(const std::string& dir);

/// Reads verl's transformer_config.json (asdict(TransformerConfig)). Errors name the file.
Result<MegatronConfig> readTransformerConfig(const std::string& path);
/// The sizes from the transformer_config.json nearest to `info.root` (none when there is no such file). Records
/// the file in info.notes, or a problem naming it when it cannot be read.
MegatronConfig loadTransformerConfig(CheckpointInfo& info);

/// Reads Megatron-LM's `args` (an argparse.Namespace, an inert Object after unpickling). `source` names the file.
MegatronConfig megatronConfigFromArgs(const PyRef& args, const std::string& source);

/// Megatron's get_transformer_layer_offset(): the global number of the first layer of virtual stage `vp` on
/// pipeline rank `pp`. Needs numLayers; handles uneven first/last stages and the interleaved schedule.
/// Returns nullopt when numLayers is unknown.
std::optional<std::int64_t> megatronLayerOffset(const MegatronConfig& config, int pp, int vp);

/// How many layers virtual stage `vp` of pipeline rank `pp` holds under `config`, nullopt when unknown.
std::optional<std::int64_t> megatronStageLayers(const MegatronConfig& config, int pp, int vp);

/// A global dim that disagrees with the model sizes in the config.
struct MegatronShapeMismatch {
    std::size_t dim = 0;  ///< index into the checked shape (leading axes included)
    std::string message;  ///< "dim 0 is 192 but transformer_config.json gives (…) = 96"
};

/// Checks a global weight shape against the model sizes the config records (linear_qkv and linear_proj of
/// attention, linear_fc1 rows and linear_fc2 columns of dense MLPs, the embedding width). `leadingAxes` is 1 for
/// torch_dist's stacked layer axis. nullopt when they agree or the config does not say.
std::optional<MegatronShapeMismatch> checkShapeAgainstConfig(const std::string& name, const Shape& shape,
                                                             std::size_t leadingAxes, const MegatronConfig& config);

} // namespace tessera
