// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Readers for each checkpoint layout; scanCheckpoint() picks one. Each fills a CheckpointInfo from `dir`.

#include "model/checkpoint.h"
#include "progress.h"
#include "result.h"

#include <string>

namespace tessera {

/// verl FSDP/FSDP2/HSDP: model_world_size_W_rank_R.pt files (DTensor, ShardedTensor or plain values).
Result<CheckpointInfo> scanVerlFsdp(const std::string& dir, int threads, Progress& progress);
/// A single torch.save file holding a state dict.
Result<CheckpointInfo> scanTorchSaveFile(const std::string& path);
/// PyTorch DCP: .metadata + __R_I.distcp (torchtitan, accelerate, Megatron torch_dist's tensors).
Result<CheckpointInfo> scanDcp(const std::string& dir, int threads, Progress& progress);

} // namespace tessera

namespace tessera {

/// Megatron per-rank folders: verl's legacy `mp_rank_XX[_YYY][_ZZZ]/model.pt` (a list of state dicts, one per
/// virtual stage) and Megatron-LM's `mp_rank_*/model_optim_rng.pt` (`model` or `model0`…, plus `args`).
/// Tensors are reported with their Megatron names and global shapes (TP pieces placed, layers renumbered).
Result<CheckpointInfo> scanMegatronPerRank(const std::string& dir, int threads, Progress& progress);
/// Megatron-core torch_dist: a DCP folder with metadata.json (and common.pt).
Result<CheckpointInfo> scanMegatronDist(const std::string& dir, int threads, Progress& progress);

} // namespace tessera
