// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// A large synthetic verl FSDP2 checkpoint written with the project's own torch.save writer, shared by the
// benchmark programs.

#include "model/placement.h"
#include "pickle/torch_save_writer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tessera::bench {

struct GlobalTensor {
    std::string name;
    Shape shape;
};

/// A Llama-like model of about `gb` GB in bf16: hidden 4096, MLP 11008, as many layers as fit.
inline std::vector<GlobalTensor> syntheticModel(double gb, std::int64_t h = 4096)
{
    const std::int64_t m = h * 11008 / 4096, vocab = 32000;
    std::vector<GlobalTensor> t { { "model.embed_tokens.weight", { vocab, h } } };
    const double perLayer = (4.0 * h * h + 3.0 * h * m) * 2;
    const int layers = std::max(1, static_cast<int>((gb * 1e9 - 2.0 * vocab * h * 2) / perLayer + 0.999));
    for (int l = 0; l < layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        for (const char* n : { "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                               "self_attn.o_proj.weight" })
            t.push_back({ p + n, { h, h } });
        t.push_back({ p + "mlp.gate_proj.weight", { m, h } });
        t.push_back({ p + "mlp.up_proj.weight", { m, h } });
        t.push_back({ p + "mlp.down_proj.weight", { h, m } });
        t.push_back({ p + "input_layernorm.weight", { h } });
        t.push_back({ p + "post_attention_layernorm.weight", { h } });
    }
    t.push_back({ "model.norm.weight", { h } });
    t.push_back({ "lm_head.weight", { vocab, h } });
    return t;
}

/// The model as PEFT wraps it for a LoRA run of rank `r` on all seven projections: each becomes
/// `….base_layer.weight` plus `lora_A.default.weight` [r, in] and `lora_B.default.weight` [out, r]; every name
/// gets the `base_model.model.` prefix.
inline std::vector<GlobalTensor> withLora(const std::vector<GlobalTensor>& model, std::int64_t r)
{
    std::vector<GlobalTensor> out;
    for (const auto& t : model) {
        const std::string prefixed = "base_model.model." + t.name;
        const bool target = t.name.find("_proj.weight") != std::string::npos;
        if (!target) {
            out.push_back({ prefixed, t.shape });
            continue;
        }
        const std::string module = prefixed.substr(0, prefixed.size() - std::string(".weight").size());
        out.push_back({ module + ".base_layer.weight", t.shape });
        out.push_back({ module + ".lora_A.default.weight", { r, t.shape[1] } });
        out.push_back({ module + ".lora_B.default.weight", { t.shape[0], r } });
    }
    return out;
}

/// Writes model_world_size_R_rank_r.pt files of about `gb` GB (hidden size `hidden`) plus config files into `dir`.
/// Matrices are sharded along `shardDim` (0: FSDP's rows, streamed by the merge; 1: columns, which the merge
/// must gather in a tensor-sized buffer); vectors always along dim 0. `loraRank` > 0 writes a LoRA run instead
/// (withLora(), and lora_train_meta.json with alpha = 2·r). `dtype` bfloat16 or float32 (`gb` counts bf16 bytes;
/// float32 holds the same bf16-representable values in twice the bytes). `seed` changes every value: the same model
/// saved at another step.
inline Status writeCheckpoint(const std::string& dir, double gb, int ranks, std::int64_t hidden = 4096, int shardDim = 0,
                              std::int64_t loraRank = 0, DType dtype = DType::BFloat16, std::uint64_t seed = 0)
{
    namespace fs = std::filesystem;
    fs::create_directories(dir + "/huggingface");
    std::ofstream(dir + "/huggingface/config.json")
        << "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"tie_word_embeddings\": false,\n"
           "  \"torch_dtype\": \"bfloat16\"\n}\n";
    std::ofstream(dir + "/fsdp_config.json") << "{\"FSDP_version\": 2, \"world_size\": " << ranks << "}\n";
    const auto model = loraRank > 0 ? withLora(syntheticModel(gb, hidden), loraRank) : syntheticModel(gb, hidden);
    if (loraRank > 0)
        std::ofstream(dir + "/lora_train_meta.json")
            << "{\"r\": " << loraRank << ", \"lora_alpha\": " << 2 * loraRank << ", \"task_type\": \"CAUSAL_LM\"}\n";
    DeviceMesh mesh { { ranks }, { "fsdp" }, {} };
    for (int r = 0; r < ranks; ++r)
        mesh.ranks.push_back(r);
    for (int r = 0; r < ranks; ++r) {
        std::vector<TorchSaveTensor> tensors;
        for (const auto& g : model) {
            TorchSaveTensor t;
            t.name = g.name;
            t.dtype = dtype;
            t.dtensor = true;
            t.globalShape = g.shape;
            const int dim = g.shape.size() > 1 ? shardDim : 0;
            t.placements = { Placement::shard(dim) };
            t.mesh = mesh;
            t.coordinate = { r };
            auto chunk = chunkRange(g.shape[static_cast<std::size_t>(dim)], ranks, r);
            t.shape = g.shape;
            t.shape[static_cast<std::size_t>(dim)] = chunk.size;
            tensors.push_back(std::move(t));
        }
        const std::string path = dir + "/model_world_size_" + std::to_string(ranks) + "_rank_" + std::to_string(r) + ".pt";
        auto status = writeTorchSave(path, tensors, [&](std::size_t i, std::uint64_t off, std::uint8_t* dst, std::uint64_t n) {
            // Deterministic bf16 noise, different per tensor, rank and position.
            std::uint64_t s = (i + 1) * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(r) << 40 ^ off ^ seed << 52;
            const std::uint64_t es = dtypeSize(dtype);
            for (std::uint64_t k = 0; k + es <= n; k += es) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                const std::uint16_t v = static_cast<std::uint16_t>(0x3C00 + (s & 0x07FF)) ^ static_cast<std::uint16_t>((s >> 20) & 0x8000);
                const std::uint32_t wide = static_cast<std::uint32_t>(v) << 16; // the same value as float32
                std::memcpy(dst + k, es == 4 ? static_cast<const void*>(&wide) : &v, es);
            }
            return Status::success();
        });
        if (!status)
            return status;
    }
    return Status::success();
}

/// The config of syntheticModel(gb, hidden) (32 heads) and a tokenizer of its 256 byte tokens (the rest of the
/// 32000 rows are padding tokens) in `hfDir`, so the checkpoint exports as GGUF like a real Llama.
inline void writeLlamaConfig(const std::string& hfDir, double gb, std::int64_t hidden = 4096)
{
    int layers = 0;
    for (const auto& t : syntheticModel(gb, hidden))
        if (t.name.find("input_layernorm") != std::string::npos)
            ++layers;
    std::ofstream(hfDir + "/config.json")
        << "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n  \"hidden_size\": "
        << hidden << ",\n  \"intermediate_size\": " << hidden * 11008 / 4096 << ",\n  \"num_hidden_layers\": " << layers
        << ",\n  \"num_attention_heads\": 32,\n  \"num_key_value_heads\": 32,\n  \"vocab_size\": 32000,\n"
           "  \"max_position_embeddings\": 4096,\n  \"rms_norm_eps\": 1e-05,\n  \"rope_theta\": 10000.0,\n"
           "  \"tie_word_embeddings\": false,\n  \"torch_dtype\": \"bfloat16\"\n}\n";
    std::ofstream tok(hfDir + "/tokenizer.json");
    tok << "{\"version\": \"1.0\", \"added_tokens\": [], \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
           "\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}, \"decoder\": {\"type\": "
           "\"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {";
    for (int i = 0; i < 256; ++i)
        tok << (i ? ", " : "") << "\"<0x" << std::hex << i << std::dec << ">\": " << i;
    tok << "}}}\n";
}

} // namespace tessera::bench
