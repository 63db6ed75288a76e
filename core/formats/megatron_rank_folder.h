// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// One mp_rank_* folder of a Megatron per-rank checkpoint and what its file holds: one state dict per virtual
// pipeline stage, as raw per-rank tensors under their local layer and expert numbers (layout_megatron places them).

#include "model/checkpoint.h"
#include "pickle/pickle_value.h"
#include "pickle/torch_save.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

/// A tensor of one state dict, under its flattened local name.
struct MegatronLocalTensor {
    std::string name;
    TensorRef tensor;
};

/// One mp_rank_* folder and what its file holds.
struct MegatronRankFolder {
    std::string folderName;             ///< "mp_rank_01_000"
    std::string dir;                    ///< absolute folder path
    std::string path;                   ///< absolute data file path; empty when the folder has none
    std::vector<std::int64_t> numbers;  ///< the numbers in the folder name, in order
    int tp = 0, pp = 0, ep = 0;         ///< resolved ranks
    std::shared_ptr<TorchSaveFile> archive;
    std::vector<std::vector<MegatronLocalTensor>> chunks; ///< one state dict per virtual pipeline stage
    PyRef args;
    std::vector<Problem> problems;
    bool readable = false;
    int skippedExtraState = 0;
};

/// Reads one folder's pickle (`rank.path`): the list of state dicts (verl) or the dict with model/model0… and args
/// (Megatron-LM). What is wrong goes to `rank.problems`; `rank.readable` says whether the file could be read.
void readMegatronRankFolder(MegatronRankFolder& rank);

} // namespace tessera
