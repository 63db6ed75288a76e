// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Readers for each checkpoint layout; scanCheckpoint() picks one. Each fills a CheckpointInfo from `dir`.

#include "model/checkpoint.h"
#include "pickle/pickle_value.h"
#include "progress.h"
#include "result.h"

#include <map>
#include <string>
#include <vector>

namespace tessera {

/// verl FSDP/FSDP2/HSDP: model_world_size_W_rank_R.pt files (DTensor, ShardedTensor or plain values).
Result<CheckpointInfo> scanVerlFsdp(const std::string& dir, int threads, Progress& progress);
/// A single torch.save file holding a state dict.
Result<CheckpointInfo> scanTorchSaveFile(const std::string& path);

/// verl's optimizer files of an FSDP actor folder, read like its model files.
struct OptimizerFiles {
    /// The optimizer state's tensors as a checkpoint: each named by its path in the state dict ("state.0.exp_avg",
    /// in rank 0's order), its pieces in the optim_world_size_W_rank_R.pt files. Missing ranks, files unlike rank
    /// 0's and files of other world sizes are its problems.
    CheckpointInfo info;
    /// Rank 0's state dict ({"state": …, "param_groups": …}) with each tensor replaced by a placeholder: a
    /// PyValue::Kind::Tensor without a TensorRef whose `integer` is the tensor's index in `info.tensors`. Null when
    /// rank 0's file could not be read.
    PyRef skeleton;
};

/// Reads `dir`'s optim_world_size_`world`_rank_R.pt files (no tensor data).
Result<OptimizerFiles> scanVerlFsdpOptimizer(const std::string& dir, std::int64_t world, int threads,
                                             Progress& progress);
/// PyTorch DCP: .metadata + __R_I.distcp (torchtitan, accelerate, Megatron torch_dist's tensors).
/// torchtitan's training state beside the model's keys is not the model: the optimizer's tensors are described in
/// CheckpointInfo::optimizer, the scheduler's, data loader's and train state's entries counted in a note.
Result<CheckpointInfo> scanDcp(const std::string& dir, int threads, Progress& progress);
/// Every tensor entry of a DCP folder, whatever it holds; the keys of its non-tensor entries in `nonTensorEntries`.
Result<CheckpointInfo> scanDcpEntries(const std::string& dir, int threads, Progress& progress,
                                      std::vector<std::string>& nonTensorEntries);

/// One non-tensor entry of a DCP folder (a pickled object saved as bytes): where its bytes lie.
struct DcpBytesEntry {
    std::string fqn;
    std::string file;           ///< absolute path of the .distcp file
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    PyRef plannerPath;          ///< its planner_data path (the nested keys it was flattened from); may be null
};

/// What a DCP folder holds besides the model (torchtitan's training state): its tensor entries under optimizer,
/// lr_scheduler, dataloader or train_state, read as a checkpoint, and every non-tensor entry.
struct DcpTrainingEntries {
    CheckpointInfo tensors;
    std::map<std::string, PyRef> plannerPaths; ///< planner_data path of each of `tensors`
    std::vector<DcpBytesEntry> bytes;
    bool any() const { return !tensors.tensors.empty() || !bytes.empty(); }
};
Result<DcpTrainingEntries> scanDcpTrainingEntries(const std::string& dir, int threads, Progress& progress);

} // namespace tessera

namespace tessera {

/// Megatron per-rank folders: verl's legacy `mp_rank_XX[_YYY][_ZZZ]/model.pt` (a list of state dicts, one per
/// virtual stage) and Megatron-LM's `mp_rank_*/model_optim_rng.pt` (`model` or `model0`…, plus `args`).
/// Tensors are reported with their Megatron names and global shapes (TP pieces placed, layers renumbered).
Result<CheckpointInfo> scanMegatronPerRank(const std::string& dir, int threads, Progress& progress);
/// Megatron-core torch_dist: a DCP folder with metadata.json (and common.pt).
Result<CheckpointInfo> scanMegatronDist(const std::string& dir, int threads, Progress& progress);

} // namespace tessera
