// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron layouts (placeholder until the Megatron readers land).

#include "layouts.h"

namespace tessera {

Result<CheckpointInfo> scanMegatronPerRank(const std::string& dir, int, Progress&)
{
    return makeError(dir + ": reading Megatron per-rank checkpoints is not implemented yet");
}

Result<CheckpointInfo> scanMegatronDist(const std::string& dir, int threads, Progress& progress)
{
    auto info = scanDcp(dir, threads, progress);
    TESSERA_TRY(info);
    info->layout = "megatron-dist";
    return info;
}

} // namespace tessera
