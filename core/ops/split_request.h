// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera split` as data: a Hugging Face model, or any checkpoint, written as another layout. Read from argv or
// from the workbench's Split page (with the Merge page's model flags).

#include "ops/arg_parser.h"
#include "ops/model_request.h"
#include "ops/part_request.h"
#include "result.h"
#include "split/split_plan.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

struct SplitRequest : ModelRequest, PartRequest {
    std::optional<std::string> hfDir;        ///< --hf_dir: a Hugging Face model (instead of --local_dir)
    std::optional<std::string> targetDir;    ///< --target_dir
    std::optional<std::string> format;       ///< --format (fsdp)
    std::optional<std::string> worldSize;    ///< --world_size
    std::optional<std::string> mesh;         ///< --mesh
    std::optional<std::string> meshDimNames; ///< --mesh_dim_names
    std::optional<std::string> tp, pp, vpp, ep;
    std::optional<std::string> firstStageLayers; ///< --num_layers_in_first_pipeline_stage
    std::optional<std::string> lastStageLayers;  ///< --num_layers_in_last_pipeline_stage
    std::optional<std::string> vocabDivisibleBy; ///< --make_vocab_size_divisible_by (128)
    std::optional<std::string> flavor;           ///< --flavor (verl)
    std::optional<std::string> iteration;        ///< --iteration
    bool modelOnly = false;                  ///< --model_only: leave the training state behind
    bool dryRun = false;
    bool tensors = false;

    static ArgParser parser();
    static SplitRequest fromParser(const ArgParser& parsed);
    /// The words after `tessera split`, read as the command line reads them; the error is the usage error.
    static Result<SplitRequest> fromArgs(const std::vector<std::string>& args);
    /// The words after `tessera split` that make this request.
    std::vector<std::string> toArgs() const;
    /// Every check of the flags that needs nothing read; an error is a usage error.
    Status validate(const EnvLookup& env = processEnvironment()) const;

    /// What is split: --hf_dir, else --local_dir.
    std::string source() const { return hfDir ? *hfDir : localDir.value_or(""); }

    bool operator==(const SplitRequest& other) const;
    bool operator!=(const SplitRequest& other) const { return !(*this == other); }
};

/// The split flags read.
struct SplitSettings {
    SplitOptions options;          ///< layout and sizes (the model-dependent rest is set by prepareSplit())
    std::optional<PartSpec> part;
};

/// Checks and converts every flag of `request` in the command line's order (the split's, then the model's: the
/// model read from --hf_dir as from --local_dir).
Result<std::pair<ModelSettings, SplitSettings>> splitSettings(const SplitRequest& request, const EnvLookup& env);

} // namespace tessera
