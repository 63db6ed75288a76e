// SPDX-License-Identifier: GPL-3.0-or-later
// A --param_mapping rules file layered over the built-in llama family (or the family it "extends"): the schema,
// the patterns and templates, the expressions of defaults, ranges, shapes and conditions, evaluated against a
// small llama config.json and applied to the Megatron names of a small checkpoint, and read backwards, as split
// does, over the Hugging Face names of the same model.

#include "fuzz_targets.h"
#include "scratch_folder.h"

#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping.h"
#include "mapping/megatron_mapping_rules.h"
#include "merge/merge_plan.h"
#include "split/split_megatron.h"

namespace tessera::fuzz {

namespace {

const char* const kLlamaConfig = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 8,
  "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 500, "tie_word_embeddings": false})";

/// A TP=1 Megatron llama with two layers, its tensors each in one contiguous piece (no file is ever read).
CheckpointInfo smallMegatronLlama(const std::string& configDir)
{
    CheckpointInfo info;
    info.layout = "megatron-legacy";
    info.root = configDir;
    info.hfConfigDir = configDir;
    auto add = [&](const std::string& name, Shape shape) {
        TensorInfo t;
        t.name = name;
        t.dtype = DType::BFloat16;
        t.shape = shape;
        Piece piece;
        piece.file = configDir + "/model.pt";
        piece.offsets = Shape(shape.size(), 0);
        piece.shape = shape;
        piece.strides = Shape(shape.size(), 1);
        for (std::size_t i = shape.size(); i-- > 1;)
            piece.strides[i - 1] = piece.strides[i] * shape[i];
        piece.storedDtype = DType::BFloat16;
        piece.storageBytes = t.nbytes();
        t.pieces.push_back(piece);
        info.tensors.push_back(std::move(t));
    };
    add("embedding.word_embeddings.weight", { 512, 64 });
    for (int layer = 0; layer < 2; ++layer) {
        const std::string prefix = "decoder.layers." + std::to_string(layer) + ".";
        add(prefix + "self_attention.linear_qkv.layer_norm_weight", { 64 });
        add(prefix + "self_attention.linear_qkv.weight", { 96, 64 });
        add(prefix + "self_attention.linear_proj.weight", { 64, 64 });
        add(prefix + "mlp.linear_fc1.layer_norm_weight", { 64 });
        add(prefix + "mlp.linear_fc1.weight", { 352, 64 });
        add(prefix + "mlp.linear_fc2.weight", { 64, 176 });
    }
    // A multi-token-prediction layer, so renames and layer offsets have names to act on.
    add("mtp.layers.0.enorm.weight", { 64 });
    add("mtp.layers.0.transformer_layer.self_attention.linear_proj.weight", { 64, 64 });
    add("decoder.final_layernorm.weight", { 64 });
    add("output_layer.weight", { 512, 64 });
    return info;
}

/// The same llama as a Hugging Face model about to be split (only names, dtypes and shapes; nothing is read).
MergePlan smallHfLlama(const std::string& configDir)
{
    MergePlan plan;
    plan.config.path = configDir;
    auto add = [&](const std::string& name, Shape shape) {
        PlannedTensor t;
        t.name = name;
        t.sourceDtype = t.dtype = DType::BFloat16;
        t.shape = shape;
        plan.tensors.push_back(std::move(t));
    };
    add("model.embed_tokens.weight", { 500, 64 });
    for (int layer = 0; layer < 2; ++layer) {
        const std::string prefix = "model.layers." + std::to_string(layer) + ".";
        add(prefix + "input_layernorm.weight", { 64 });
        add(prefix + "self_attn.q_proj.weight", { 64, 64 });
        add(prefix + "self_attn.k_proj.weight", { 16, 64 });
        add(prefix + "self_attn.v_proj.weight", { 16, 64 });
        add(prefix + "self_attn.o_proj.weight", { 64, 64 });
        add(prefix + "post_attention_layernorm.weight", { 64 });
        add(prefix + "mlp.gate_proj.weight", { 176, 64 });
        add(prefix + "mlp.up_proj.weight", { 176, 64 });
        add(prefix + "mlp.down_proj.weight", { 64, 176 });
    }
    add("model.norm.weight", { 64 });
    add("lm_head.weight", { 500, 64 });
    return plan;
}

} // namespace

int fuzzMappingRules(const std::uint8_t* data, std::size_t size)
{
    static const std::string configDir = [] {
        writeScratchFile("mapping_rules/config/config.json", kLlamaConfig);
        return scratchFolder() + "/mapping_rules/config";
    }();
    static const CheckpointInfo source = smallMegatronLlama(configDir);
    static const Result<MappingRuleSet> llama = builtinMappingRules("llama");
    if (!llama)
        return 0;
    const std::string path = writeScratchFile("mapping_rules/rules.json", data, size);

    // The rule language on its own: the layered set, its expected parameters under the small config.
    if (auto rules = applyUserMappingRules(*llama, path)) {
        if (auto config = readHfModelConfig(configDir))
            if (auto vars = resolveConfigVars(*config, *rules, {}))
                (void)expectedHfParameters(*rules, *vars);
    }
    // And as the merge uses it: every Megatron name matched against the rules.
    MappingOptions options;
    options.userRulesFile = path;
    (void)mapMegatronToHf(source, options);
    // And backwards: every Hugging Face name matched against the rules' targets, as split plans Megatron TP 2.
    static const MergePlan model = smallHfLlama(configDir);
    SplitOptions split;
    split.format = SplitFormat::Megatron;
    split.tp = 2;
    split.userRulesFile = path;
    (void)planMegatronSplit(model, split);
    return 0;
}

} // namespace tessera::fuzz
