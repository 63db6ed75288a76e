// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The training state saved beside a verl FSDP actor's model files, which a resumed run loads with them: the
// optimizer (optim_world_size_W_rank_R.pt), the scheduler and random state (extra_state_world_size_W_rank_R.pt)
// and the dataloader (../data.pt). Read without tensor data; checked against the model it belongs to.

#include "formats/layouts.h"
#include "model/checkpoint.h"
#include "pickle/pickle_value.h"
#include "progress.h"
#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// The optimizer state kept for one parameter (one entry of the state dict's "state").
struct ParameterState {
    std::int64_t index = 0;            ///< the parameter's index in the optimizer (model.parameters() order)
    std::string parameter;             ///< the model tensor it belongs to, when the state matches the model
    std::vector<std::size_t> tensors;  ///< its tensors (exp_avg, exp_avg_sq, step, …): indices into optimizer.info
    std::optional<double> step;        ///< the value of its "step" entry, when that is a scalar
};

struct TrainingState {
    std::string actorDir;
    int worldSize = 0;
    /// The optimizer files, when any are there.
    std::optional<OptimizerFiles> optimizer;
    std::vector<ParameterState> parameters;
    std::vector<std::pair<std::string, std::string>> hyperParameters; ///< param_groups[0] (name → value), params left out
    std::size_t paramGroups = 0;
    std::int64_t optimizerParameters = 0; ///< the parameters the param_groups list
    std::string optimizerKind;            ///< "Adam/AdamW (exp_avg, exp_avg_sq)", from the state's keys
    /// extra_state_world_size_W_rank_R.pt per rank ("" where missing); empty when the folder has none.
    std::vector<std::string> extraStateFiles;
    PyRef lrScheduler;                    ///< rank 0's scheduler state (null when there is none)
    std::string schedulerPosition;        ///< "last_epoch 2, lr 0.0066" for reports
    bool rng = false;                     ///< the extra state holds random state
    std::string dataFile;                 ///< the dataloader state beside the actor folder (../data.pt), "" if none
    std::vector<std::string> otherRoles;  ///< sibling role folders of the step (critic/ beside actor/)
    /// A DCP folder's training state (torchtitan's optimizer, lr_scheduler, dataloader and train_state entries).
    std::optional<DcpTrainingEntries> dcp;
    /// Training state a split cannot carry (Megatron's optimizer keys in torch_dist), described; "" when none.
    std::string uncarried;
    /// Why the state cannot be carried as it is: missing or unreadable ranks, ranks that disagree, an optimizer
    /// state that does not match the model's parameters. Empty when it can.
    std::vector<Problem> problems;

    bool hasOptimizer() const { return optimizer.has_value(); }
    bool hasExtraState() const { return !extraStateFiles.empty(); }
    /// Whether the folder holds any training state at all.
    bool any() const { return hasOptimizer() || hasExtraState() || (dcp && dcp->any()) || !uncarried.empty(); }
};

/// Reads the training state beside the verl FSDP checkpoint `model` (its model files already read), or within the
/// DCP folder `model`; an empty state for other layouts. Errors only when the folder cannot be read at all.
Result<TrainingState> readTrainingState(const CheckpointInfo& model, int threads, Progress& progress);

/// verl's name of a rank's file: "optim_world_size_4_rank_0.pt" for stem "optim".
std::string verlRankFileName(const char* stem, int world, int rank);

/// The verl setting that resumes from the model files alone.
inline constexpr const char* kModelOnlyResumeSetting = "checkpoint.load_contents=[model]";

} // namespace tessera
