// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What `tessera inspect` prints and the workbench's Training view shows of a checkpoint's training state: one
// list of facts for both, the JSON object, and the table of optimizer norms as text.

#include "compare/training_norms.h"
#include "formats/training_state.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace tessera {

/// One line of the training state: "Adam step" → "2".
struct TrainingFact {
    std::string label;
    std::string value;
};

/// The facts in the order they are shown: optimizer, its hyper-parameters, parameters with state, Adam step,
/// scheduler, RNG state, dataloader, other roles, and whether the state is complete for every rank.
std::vector<TrainingFact> trainingStateFacts(const TrainingState& state);

/// The distinct Adam steps of the parameters, smallest first (one value when they agree, as they should).
std::vector<double> adamSteps(const TrainingState& state);

/// A step as it is counted: "2", or "2.5" for a value that is not whole.
std::string stepText(double step);

/// The "Training state" section of `inspect`: the facts, then each problem.
std::string trainingStateSummary(const TrainingState& state);

/// `inspect --json`'s "training_state": the facts as values, the problems, and `norms` when computed.
nlohmann::json trainingStateToJson(const TrainingState& state, const TrainingNorms* norms);

/// The rows the text shows when not all are asked for: the `count` largest and the `count` smallest by
/// ‖exp_avg‖ (every row when there are no more than 2·count), in that order, without rows lacking the norm.
std::vector<const ParameterNorms*> extremeNorms(const TrainingNorms& norms, std::size_t count);

/// The norms table as text: every parameter in model order (`all`), or the largest and smallest ten by
/// ‖exp_avg‖; rows whose norms could not be computed are listed with why.
std::string trainingNormsText(const TrainingNorms& norms, bool all, std::size_t count = 10);

} // namespace tessera
