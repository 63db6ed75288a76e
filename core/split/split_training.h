// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The training state a split carries with the model so a run resumes at the new world size: the optimizer's
// state resharded like the parameters it belongs to, each new rank's scheduler and random state, the dataloader's.

#include "formats/training_state.h"
#include "merge/merge_plan.h"
#include "result.h"
#include "split/split_plan.h"

#include <memory>
#include <string>
#include <vector>

namespace tessera {

/// One new rank's extra state: an old rank's file, saved under the new name.
struct ExtraStateCopy {
    std::string source;  ///< the old rank's extra_state_world_size_W_rank_R.pt
    int fromRank = 0;    ///< R
    std::string name;    ///< extra_state_world_size_M_rank_r.pt, relative to the target
};

struct TrainingSplit {
    TrainingState state;
    /// The optimizer's tensors as the engine reads them (no conversion: the moments keep their dtype).
    MergePlan optimizer;
    /// optim_world_size_M_rank_r.pt: each rank's optimizer state dict (its skeleton, its shards), and the mesh.
    SplitPlan files;
    std::vector<ExtraStateCopy> extraState;
    /// The dataloader state copied beside the target (verl's global_step_N/data.pt), "" when not carried.
    std::string dataSource;
    std::string dataTarget;              ///< where: the target's parent folder's data.pt
    /// DCP: the non-tensor entries carried (appended to rank 0's training file).
    std::vector<DcpBytesEntry> bytesEntries;
    /// What is carried, from where, and what is not, for the plan's summary.
    std::vector<std::string> notes;
    std::uint64_t bytes = 0;             ///< optimizer bytes written
};

/// Why the training state beside `state` cannot go with this split (another target layout, a run in parts, a
/// fused LoRA model, a state that is incomplete or not the model's), naming what would be dropped; success when it
/// can, or when there is none.
Status trainingStateRefusal(const TrainingState& state, const SplitPlan& modelPlan, bool inParts, bool fusedLora);

/// Plans carrying `state` with the model split `modelPlan` (an FSDP2 plan): each parameter's optimizer tensors
/// sharded as FSDP2 shards the parameter on the new mesh (stored compactly, as optimizer.state_dict() saves
/// them), scalars (step) and the hyper-parameters copied, new rank r's extra state from old rank r mod W, and
/// data.pt beside `targetDir` when it is verl's …/global_step_N/actor.
Result<std::shared_ptr<const TrainingSplit>> planTrainingSplit(TrainingState state, const SplitPlan& modelPlan,
                                                               const std::string& targetDir);

/// Makes `training` part of `plan`: its files listed and published with the model's, its bytes in the disk and
/// memory estimates.
void attachTrainingSplit(SplitPlan& plan, std::shared_ptr<const TrainingSplit> training);

} // namespace tessera
