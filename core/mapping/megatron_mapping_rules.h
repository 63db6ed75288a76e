// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Megatron → Hugging Face mapping rules as data: one JSON file per architecture family (resources/mapping/*.json,
// compiled into the core), optionally extended or overridden by a user file of the same schema (--param_mapping).
//
// Schema (every list entry has an "id"; a file that "extends" another replaces entries with the same id, removes
// them with "remove": true, and appends new ones, or inserts them "after" an id):
//   family, description, extends, architectures [..], model_types [..]
//   defaults { name: expression }          values for config.json keys that are absent
//   ranges { layer: expression, expert: expression, block: expression }   what {layer}, {expert} and {block}
//                                          (a vision tower's blocks) in "expected" run over
//   unstack [ { id, megatron, transform: unstack_layers|unstack_experts|unstack_layers_experts|rename, as,
//               layer_offset } ]
//   rules   [ { id, megatron: pattern | [patterns], hf: template | [templates], transform, when, layer_offset,
//               transpose, interleave_gate_up } ]
//   expected [ { id, hf, shape: [expressions], when } ]
// Patterns and templates use {layer}, {expert} (numbers) and {param} (a name that starts with a letter).
// Expressions are integer arithmetic over config.json keys (`num_attention_heads * head_dim`, and one level down:
// `vision_config.hidden_size`); "when" is a condition (`!tie_word_embeddings && !value_model`, or per layer in
// "expected": `layer < first_k_dense_replace`). "layer_offset" (an expression) is added to the {layer} a Megatron
// name captures before the target is written: DeepSeek-V3's mtp.layers.0.* are Hugging Face's layer
// num_hidden_layers. "stack_experts" gathers the per-expert Megatron tensors ({expert} in the pattern, not in the
// template) into one Hugging Face tensor with a leading expert axis; "transpose" and "interleave_gate_up" (true or
// false) say how each expert's tensor is laid in it.

#include "result.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

/// How a rule turns a Megatron tensor into Hugging Face tensors. Each one only re-indexes boxes of the source.
enum class MappingTransform {
    Copy,                 ///< the whole tensor under the new name
    SplitQkv,             ///< fused linear_qkv (weight or bias), grouped per query group, into q, k, v
    SplitGateUp,          ///< GLU linear_fc1 [gate; up] into its two halves
    TrimVocab,            ///< rows [0, vocab_size): drops Megatron's vocabulary padding
    UnstackLayers,        ///< torch_dist's leading layer axis into one tensor per layer
    UnstackExperts,       ///< a leading expert axis into one tensor per expert
    UnstackLayersExperts, ///< leading [layer, expert] axes into one tensor per (layer, expert)
    FuseQkvHeads,         ///< a linear_qkv interleaved per head ([q_h; k_h; v_h] for every head, as a vision tower
                          ///< with as many query groups as heads stores it) into one [q; k; v] tensor (`heads`)
    Rename,               ///< (in "unstack") another name for the same tensor, which the rules then map: a
                          ///< multi-token-prediction layer read as the decoder layer after the last one
    StackExperts,         ///< one expert's tensor as entry {expert} of a tensor of all experts ([E, …], E the
                          ///< "expert" range), optionally transposed and with its [gate; up] rows interleaved
};

/// "split_qkv" …
const char* mappingTransformName(MappingTransform transform);
/// The transform a rule file names; nullopt for an unknown name.
std::optional<MappingTransform> mappingTransformFromName(const std::string& name);

/// One rule: which Megatron names it reads and which Hugging Face names it writes.
struct MappingRule {
    std::string id;
    std::vector<std::string> megatron;  ///< alternative patterns; the first rule with a matching pattern wins
    std::vector<std::string> hf;        ///< target templates (split transforms: one per part, in order)
    MappingTransform transform = MappingTransform::Copy;
    std::string when;                   ///< condition over the config; empty = always
    std::string heads;                  ///< fuse_qkv_heads: the number of heads, an expression
    std::string layerOffset;            ///< added to {layer} from the Megatron name in the target; empty = 0
    /// stack_experts: each expert's 2-D tensor transposed first (Hugging Face's experts multiply x @ W, so
    /// GPT-OSS keeps [in, out] where Megatron's linears keep [out, in]).
    bool transpose = false;
    /// stack_experts: each expert's [gate; up] rows interleaved (gate, up, gate, up, …) along what becomes the
    /// last dim, as GPT-OSS's gate_up_proj keeps them (gate = [..., ::2], up = [..., 1::2]).
    bool interleaveGateUp = false;
    std::string origin;                 ///< the file that defined it ("llama.json", a user path)
};

/// One parameter the Hugging Face model must have, as a template.
struct ExpectedTemplate {
    std::string id;
    std::string hf;                     ///< name template; {layer} and {expert} run over the ranges
    std::vector<std::string> shape;     ///< one expression per dim
    std::string when;
    std::string origin;
};

/// A complete, resolved rule set for one architecture family.
struct MappingRuleSet {
    std::string family;
    std::string description;
    std::vector<std::string> architectures;
    std::vector<std::string> modelTypes;
    std::vector<std::pair<std::string, std::string>> defaults; ///< in file order (later ones may use earlier ones)
    std::map<std::string, std::string> ranges;                 ///< "layer" → expression, "expert" → expression
    std::vector<MappingRule> unstack;
    std::vector<MappingRule> rules;
    std::vector<ExpectedTemplate> expected;
    std::vector<std::string> sources;                          ///< files layered into it, base first
};

/// The families compiled in ("llama", "mistral", "qwen2", …), sorted.
std::vector<std::string> builtinMappingFamilies();

/// A built-in family with its `extends` chain resolved. Errors name the family or the broken file.
Result<MappingRuleSet> builtinMappingRules(const std::string& family);

/// The built-in family for a config.json: the first of `architectures` some family lists, else `modelType`.
/// The error lists what is supported and suggests --param_mapping.
Result<MappingRuleSet> selectMappingRules(const std::vector<std::string>& architectures, const std::string& modelType);

/// Layers the rule file at `path` over `base` (or over the built-in family it `extends`, when it names one). With
/// `text` (the file as an editor holds it, unsaved), that text is layered instead and `path` only names it.
Result<MappingRuleSet> applyUserMappingRules(const MappingRuleSet& base, const std::string& path,
                                             const std::optional<std::string>& text = std::nullopt);

/// Layers rule-file text over `base`; `origin` names it in messages. Exposed for tests.
Result<MappingRuleSet> overlayMappingRules(const MappingRuleSet& base, const std::string& text, const std::string& origin);

} // namespace tessera
