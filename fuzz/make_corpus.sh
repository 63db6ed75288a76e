#!/usr/bin/env bash
# Rebuilds fuzz/corpus/ (the seeds of every fuzz target) from the fixtures: small real files written by PyTorch
# 2.6 and the safetensors library, the data.pkl pickles inside them, tiny torch.save archives written by
# make_tiny_torch_save.py, and hand-written configs, indexes, rules and sizes. Needs only python3.
set -euo pipefail
cd "$(dirname "$0")/.."
S="${TESSERA_FIXTURES:-$PWD/../shared/fixtures}"; T="$PWD/tests/fixtures"; C="$PWD/fuzz/corpus"; M="$PWD/resources/mapping"
scratch="$(mktemp -d)"; trap 'rm -rf "$scratch"' EXIT
rm -rf $C; mkdir -p $C/{unpickler,zip,torch_save,safetensors_header,safetensors_index,dcp_metadata,megatron_dist,model_config,mapping_rules,regex,byte_size,gguf,sentencepiece}
python3 fuzz/make_tiny_torch_save.py "$scratch"
cp $scratch/tiny_state_dict.pkl $scratch/tiny_tensor.pkl $C/unpickler/
pkl() { python3 -c "import zipfile,sys;z=zipfile.ZipFile(sys.argv[1]);n=[x for x in z.namelist() if x.endswith('/data.pkl')][0];open(sys.argv[2],'wb').write(z.read(n))" "$1" "$2"; }
pkl $S/fsdp2_llama_w4/global_step_10/actor/model_world_size_4_rank_0.pt $C/unpickler/fsdp2_dtensor.pkl
pkl $S/fsdp1_llama_w2_dtensor/global_step_10/actor/model_world_size_2_rank_0.pt $C/unpickler/fsdp1_dtensor.pkl
pkl $T/fsdp1_llama_w2_sharded_tensor/global_step_10/actor/model_world_size_2_rank_0.pt $C/unpickler/fsdp1_sharded_tensor.pkl
pkl $T/megatron_lm_llama_tp2_pp2_vpp2/iter_0000010/mp_rank_00_000/model_optim_rng.pt $C/unpickler/megatron_lm_args.pkl
pkl $S/megatron_legacy_qwen2_tp2_pp2/global_step_10/actor/model/mp_rank_00_000/model.pt $C/unpickler/megatron_legacy_list.pkl
pkl $S/megatron_dist_llama_tp2_pp2/global_step_10/actor/dist_ckpt/common.pt $C/unpickler/megatron_common.pkl
cp $S/megatron_dist_llama_tp2_pp2/global_step_10/actor/dist_ckpt/.metadata $C/unpickler/dcp_megatron.metadata
# zip: the tiny archives, torch's layout of a real rank file with its records emptied, and a ZIP64 one
cp $scratch/tiny_state_dict.pt $scratch/tiny_tensor.pt $C/zip/
cp $S/megatron_dist_llama_tp2_pp2/global_step_10/actor/dist_ckpt/common.pt $C/zip/common.pt
python3 - $S/fsdp2_llama_w4/global_step_10/actor/model_world_size_4_rank_0.pt $C/zip <<'PY'
import sys, zipfile
src = zipfile.ZipFile(sys.argv[1])
with zipfile.ZipFile(sys.argv[2] + '/fsdp2_rank_records_emptied.zip', 'w', zipfile.ZIP_STORED) as z:
    for n in src.namelist():
        z.writestr(n, b'' if '/data/' in n else src.read(n)[:64])
with zipfile.ZipFile(sys.argv[2] + '/zip64.zip', 'w', zipfile.ZIP_STORED) as z:
    for i, n in enumerate(['archive/data.pkl', 'archive/byteorder', 'archive/data/0']):
        with z.open(n, 'w', force_zip64=True) as f:
            f.write(bytes([i]) * (8 + i))
PY
# torch_save: tiny archives, common.pt, a real FSDP2 DTensor rank file and a Megatron-LM rank file
cp $scratch/tiny_state_dict.pt $scratch/tiny_tensor.pt $C/torch_save/
cp $S/megatron_dist_llama_tp2_pp2/global_step_10/actor/dist_ckpt/common.pt $C/torch_save/common.pt
cp $S/fsdp2_llama_w4/global_step_10/actor/model_world_size_4_rank_0.pt $C/torch_save/fsdp2_dtensor_rank_0.pt
cp $T/megatron_lm_llama_tp2_pp2_vpp2/iter_0000010/mp_rank_00_000/model_optim_rng.pt $C/torch_save/megatron_lm_rank.pt
# safetensors: the PEFT adapter written by the real library and tiny hand-made ones
cp $S/lora_llama_w2_fp32/reference_adapter/adapter_model.safetensors $C/safetensors_header/adapter_model.safetensors
python3 - $C/safetensors_header <<'PY'
import json, struct, sys
def st(path, tensors, meta=None):
    h = {}; off = 0; data = b''
    for name, (dt, shape, size) in tensors.items():
        h[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [off, off + size]}; off += size; data += bytes(size)
    if meta: h['__metadata__'] = meta
    j = json.dumps(h, separators=(',', ':')).encode(); j += b' ' * (-len(j) % 8)
    open(sys.argv[1] + '/' + path, 'wb').write(struct.pack('<Q', len(j)) + j + data)
st('tiny_f32.safetensors', {'model.norm.weight': ('F32', [2], 8), 'lm_head.weight': ('F32', [1], 4)})
st('mixed_with_metadata.safetensors', {'a': ('BF16', [2, 3], 12), 'b': ('I64', [1], 8), 'c': ('BOOL', [0], 0),
   'd': ('F16', [], 2), 'e': ('U8', [3], 3)}, {'format': 'pt'})
st('empty.safetensors', {})
PY
# safetensors index (the target puts model-00001-of-00002.safetensors beside it)
cd $C/safetensors_index
echo '{"metadata": {"total_size": 12}, "weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors", "model.norm.weight": "model-00001-of-00002.safetensors"}}' > index_ok.json
echo '{"metadata": {"total_size": 20}, "weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors", "model.embed_tokens.weight": "model-00002-of-00002.safetensors"}}' > index_missing_shard.json
echo '{"weight_map": {"model.norm.weight": "../model-00001-of-00002.safetensors"}}' > index_outside.json
# DCP .metadata
cp $S/megatron_dist_llama_tp2_pp2/global_step_10/actor/dist_ckpt/.metadata $C/dcp_metadata/megatron_dist.metadata
cp $S/fsdp2_qwen2_w2_fp32/dcp/.metadata $C/dcp_metadata/fsdp2_qwen2.metadata
cp $S/hsdp_qwen2_2x2/dcp/.metadata $C/dcp_metadata/hsdp_qwen2.metadata
# Megatron torch_dist's own files
cp $S/megatron_dist_llama_tp2_pp2/global_step_10/actor/dist_ckpt/metadata.json $C/megatron_dist/metadata.json
cp $S/megatron_dist_llama_tp2_pp2/global_step_10/actor/dist_ckpt/common.pt $C/megatron_dist/common.pt
cmp -s $S/megatron_dist_deepseekv3_tp2_pp1/global_step_10/actor/dist_ckpt/common.pt $C/megatron_dist/common.pt || cp $S/megatron_dist_deepseekv3_tp2_pp1/global_step_10/actor/dist_ckpt/common.pt $C/megatron_dist/common_deepseekv3.pt
# configs
cp $S/megatron_dist_llama_tp2_pp2/global_step_10/actor/transformer_config.json $C/model_config/transformer_config_llama.json
cp $S/megatron_legacy_qwen2_tp2_pp2/global_step_10/actor/transformer_config.json $C/model_config/transformer_config_qwen2.json
cp $S/megatron_legacy_qwen25vl_tp2_pp1/global_step_10/actor/transformer_config.json $C/model_config/transformer_config_qwen25vl.json
cp $S/megatron_dist_llama_tp2_pp2/global_step_10/actor/huggingface/config.json $C/model_config/config_llama.json
cp $S/megatron_legacy_qwen2_tp2_pp2/global_step_10/actor/hf_config_and_tokenizer/config.json $C/model_config/config_qwen2.json
cp $S/megatron_dist_deepseekv3_tp2_pp1/global_step_10/actor/huggingface/config.json $C/model_config/config_deepseekv3.json
cp $S/megatron_legacy_qwen25vl_tp2_pp1/global_step_10/actor/hf_config_and_tokenizer/config.json $C/model_config/config_qwen25vl.json
# mapping rules: the built-in families and a small user file
cp $M/*.json $C/mapping_rules/
echo '{"extends": "llama", "rules": [{"id": "final_norm", "megatron": "decoder.final_norm.weight", "hf": "model.norm.weight"}, {"id": "lm_head", "remove": true}, {"id": "extra", "after": "embedding", "megatron": "decoder.layers.{layer}.extra.{param}", "hf": "model.layers.{layer}.extra.{param}", "when": "num_hidden_layers > 1 && !value_model"}], "expected": [{"id": "extra", "hf": "model.layers.{layer}.extra.weight", "shape": ["hidden_size * 2", "(vocab_size + 1) / 2 % 7"], "when": "hidden_size >= 64"}]}' > $C/mapping_rules/user_overlay.json
# rules whose templates backtracked for hours in std::regex (eight {param} groups, in both directions), and one
# too long to be a pattern
p8='{param}{param}{param}{param}{param}{param}{param}{param}'
echo '{"rules": [{"id": "embedding", "megatron": "embedding.word_embeddings.weight", "hf": "'$p8'Q"}, {"id": "greedy", "megatron": "'$p8'Q", "hf": "model.{param}"}]}' > $C/mapping_rules/greedy_params.json
echo '{"rules": [{"id": "long", "megatron": "decoder.'$(printf 'x%.0s' {1..5000})'", "hf": "model.long"}]}' > $C/mapping_rules/pattern_too_long.json
# regex: a pattern, a newline, a name; the patterns the command line takes and the names the core's own patterns read
cd $C/regex; i=0
seed() { i=$((i+1)); printf '%s\n%s' "$1" "$2" > seed_$i; }
seed 'final_layernorm|^model\.norm' 'model.norm.weight'
seed '.*bias' 'decoder.layers.0.self_attention.linear_qkv.bias'
seed '^(.|.)*Q$' 'decoder.layers.0.self_attention.linear_proj.weight'
seed "$(printf '(?:.?)%.0s' {1..600})Q" 'model.layers.0.self_attn.o_proj.weight'
seed '^(?!model\.)' 'model.norm.weight'
seed '(?<=layers\.)0|(proj)\1|(?P<n>a)' 'model.layers.0.mlp.down_proj.weight'
seed '[[:alpha:]_]+\.\d{1,3}\b\Q.weight\E$' 'language_model.decoder.layers.1.mlp.experts.local_experts.3.linear_fc1.weight'
seed '' 'mtp.layers.0.transformer_layer.mlp.experts.linear_fc2.weight7'
seed '' 'decoder.layers.0.self_attention.linear_qkv.adapter.linear_in.weight'
seed '' 'decoder.layers.99999999999999999999.mlp.linear_fc1.weight'
seed '' "decoder.layers.0.$(printf 'x%.0s' {1..3000}).weight"
# byte sizes
cd $C/byte_size; i=0
for s in 5GB 100KB 500MB 1TB 1KiB 2GiB 1.5GB "123" "4 MB" 0B 18446744073709551615 16777216TiB 5G; do i=$((i+1)); printf '%s' "$s" > seed_$i; done
# gguf and sentencepiece: small files written the way llama.cpp and SentencePiece lay them out
python3 fuzz/make_gguf_seeds.py $C/gguf $C/sentencepiece
du -sh $C; du -s $C/*
