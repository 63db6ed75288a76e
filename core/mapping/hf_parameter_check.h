// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Is a checkpoint under Hugging Face names (verl FSDP, DCP, a Hugging Face folder, a LoRA checkpoint's base
// weights) the whole model its config.json describes? The readers see only the files that are there, so a
// checkpoint saved without a layer's down_proj or without lm_head reads as complete; the parameters its
// config.json and architecture expect (hf_expected: every layer's, the head unless tied, biases where the family
// has them) say what must be there. Megatron checkpoints get the same check from their mapping.

#include "model/checkpoint.h"
#include "result.h"

#include <optional>
#include <string>

namespace tessera {

/// What the user said about the model, as for the Megatron mapping.
struct ParameterCheckOptions {
    std::string ignoreMissing;      ///< --ignore_missing_params: a regex of names that may be missing
    bool strict = true;             ///< missing parameters are problems; --no-strict makes them warnings
    std::optional<bool> valueModel; ///< --is-value-model; nullopt: a score.weight without lm_head.weight says so
    bool tieWordEmbeddings = false; ///< --tie-word-embedding: no lm_head.weight is expected
};

/// Checks `info` against the parameters its config.json (info.hfConfigDir) expects: each one missing becomes a
/// problem of `info` (a warning without strict), so inspect lists it and a merge refuses the checkpoint. A check
/// that cannot be made (an architecture Tessera has no parameter list for, names of another convention) is a
/// warning that says so. Without a config.json, and for Megatron layouts (mapMegatronToHf() checks them), and
/// for an adapter-only LoRA checkpoint (its base model is checked on its own), nothing is added. An error only
/// for a bad --ignore_missing_params.
Status checkExpectedParameters(CheckpointInfo& info, const ParameterCheckOptions& options);

} // namespace tessera
