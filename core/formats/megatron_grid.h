// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The (tensor, pipeline, expert) grid of a Megatron per-rank checkpoint: which number in an mp_rank_* folder name
// is which rank, decided from the names and the config together, and the folder name of each rank.

#include "formats/megatron_config.h"
#include "formats/megatron_rank_folder.h"
#include "result.h"

#include <string>
#include <vector>

namespace tessera {

/// What the folder names and the config say together about which number in a folder name is which.
struct MegatronGridShape {
    int tp = 1, pp = 1, ep = 1, vpp = 1;
    bool namesHavePp = false, namesHaveEp = false;
};

/// Decides the grid, and fills in each folder's ranks and the sizes `config` lacks; returns an error message when
/// nothing tells which number is which. Where the names contradict the config, the names are followed and
/// `problems` says so.
Result<MegatronGridShape> resolveMegatronGrid(std::vector<MegatronRankFolder>& folders, MegatronConfig& config,
                                              std::vector<Problem>& problems, const std::string& root);

/// "mp_rank_01_002_000": the folder Megatron names for a rank, with the parts the folder names carry.
std::string megatronRankFolderName(int tp, int pp, int ep, bool withPp, bool withEp);

} // namespace tessera
