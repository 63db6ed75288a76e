// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera drift RUN` and the workbench's Run page: how every tensor of a training run moved from one saved step to
// the next, and where NaN or Inf appeared, read streaming from the distributed checkpoints without merging them.

#include "formats/run_steps.h"
#include "model/dtype.h"
#include "model/checkpoint.h"
#include "progress.h"
#include "result.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// What to read.
struct DriftOptions {
    std::string root;                 ///< the run root (or a single step's folder)
    std::string role = "actor";       ///< a verl step's role folder: actor or critic
    std::vector<long long> steps;     ///< the steps to read (--steps); empty = every saved step
    std::string hfModelPath;          ///< config.json for Megatron names (--hf_model_path); found beside each step
    int threads = 0;                  ///< threads per tensor (blocks of one tensor in parallel); 0 = one per core
};

/// One tensor at one step.
struct DriftRecord {
    std::string name;                 ///< the Hugging Face name (Megatron names mapped)
    long long step = 0;
    std::optional<long long> previousStep; ///< the step compared with: the last one before `step` holding the tensor
    DType dtype = DType::Unknown;
    Shape shape;
    std::uint64_t elements = 0;
    std::optional<double> relativeChange; ///< ‖W_s − W_prev‖₂ / ‖W_prev‖₂ in float64; null: see `why`
    std::optional<double> maxAbsChange;   ///< max |W_s − W_prev|; null when relativeChange is for another reason
                                          ///< than ‖W_prev‖ = 0
    std::optional<double> norm;           ///< ‖W_s‖₂; null when W_s holds NaN or Inf
    std::uint64_t nan = 0;            ///< exact counts of non-finite elements of W_s
    std::uint64_t inf = 0;
    std::string why;                  ///< why relativeChange is null: "first step", "NaN/Inf in this step", "NaN/Inf
                                      ///< in the previous step", "previous norm is 0", "not in the previous step",
                                      ///< "shape changed"; empty when it is set
    bool nonFinite() const { return nan + inf > 0; }
};

/// A step that could not be read, or not wholly: the others are still reported.
struct DamagedStep {
    long long step = 0;
    std::string problem;
};

/// Everything `drift` found.
struct DriftReport {
    std::string root;
    std::string role;
    std::vector<RunStep> steps;       ///< the steps read (and damaged ones), ascending
    std::vector<std::string> tensors; ///< every tensor name, in the order of the first step that has it
    /// Step by step (ascending), each step's tensors in `tensors` order; a tensor a step lacks has no record there.
    std::vector<DriftRecord> records;
    std::vector<DamagedStep> damaged;

    /// The record of `name` at `step`, or null.
    const DriftRecord* find(const std::string& name, long long step) const;
    std::uint64_t nonFiniteRecords() const;
    /// Exit status of `tessera drift`: false when any NaN/Inf was found or a step is damaged.
    bool clean() const { return nonFiniteRecords() == 0 && damaged.empty(); }
    /// The steps with at least one damaged entry.
    std::size_t damagedSteps() const;
};

/// Called (serialised, on the reading thread) for each record as soon as it is known; records come tensor by tensor,
/// each through all steps. `soFar` is the report being made: its steps and tensors are final, its damaged steps those
/// found so far; its records are laid out at the end (the sink keeps the ones it was given).
using DriftRecordSink = std::function<void(const DriftReport& soFar, const DriftRecord& record)>;

/// Reads the run's steps (findRunSteps(), filtered by options.steps: a step asked for that is not saved is an Error
/// naming the saved ones), each with its own layout, and reports every tensor at every step. A tensor is read
/// through all steps before the next, its blocks compared on several threads: plain pieces in place (TensorValues),
/// the step before read again while the page cache holds it; an assembled tensor is held, two copies at most.
/// Progress counts bytes; cancel is checked between tensors.
/// A step whose scan fails, reports problems, or whose tensor cannot be read is listed in `damaged` (its tensors
/// that could be read still have records). An Error only when the run itself cannot be read.
Result<DriftReport> driftRun(const DriftOptions& options, Progress& progress = silentProgress(),
                             const DriftRecordSink& onRecord = {});

} // namespace tessera
