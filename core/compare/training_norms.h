// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// How far each parameter's optimizer state has moved: the L2 norms of Adam's first moment and of the square root of
// its second moment, per parameter, read from a verl FSDP actor's optimizer files. Which layers are still learning
// (a large exp_avg) and which have settled is what an engineer asks of a checkpoint before resuming it elsewhere.

#include "formats/training_state.h"
#include "progress.h"
#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// One parameter's row of the table.
struct ParameterNorms {
    std::int64_t index = 0;                    ///< the parameter's index in the optimizer (model order)
    std::string parameter;                     ///< the model tensor it belongs to; "state.<index>" when unmatched
    Shape shape;                               ///< of its exp_avg (else its first non-scalar state tensor)
    std::optional<double> step;                ///< its Adam step, when a scalar
    std::optional<double> expAvgNorm;          ///< ‖exp_avg‖₂; none when it has no exp_avg or it could not be read
    std::optional<double> expAvgSqRootNorm;    ///< ‖√exp_avg_sq‖₂ = √Σ exp_avg_sq; likewise
    std::string note;                          ///< why a norm is absent (incomplete ranks, unreadable data, dtype)
};

/// The table, ordered as the model's parameters.
struct TrainingNorms {
    std::vector<ParameterNorms> parameters;
    std::uint64_t bytesRead = 0;
};

/// Reads every exp_avg and exp_avg_sq of `state`'s optimizer whole, one tensor at a time per thread (memory
/// bounded by the largest tensor times `threads`), and sums in double. Progress in bytes; canceled between
/// tensors and slabs. A tensor that cannot be read, or has elements no rank holds, leaves its norm empty with a
/// note; an error only when the state has no optimizer or the run is canceled.
Result<TrainingNorms> computeTrainingNorms(const TrainingState& state, int threads = 0,
                                           Progress& progress = silentProgress());

} // namespace tessera
