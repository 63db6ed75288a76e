// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera diff` as data: two checkpoints (or a LoRA checkpoint and its base) to compare tensor by tensor. Read
// from argv or from the workbench's Diff page.

#include "compare/tensor_diff.h"
#include "ops/arg_parser.h"
#include "ops/test_request.h"
#include "result.h"

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tessera {

struct DiffRequest {
    std::optional<std::string> a;           ///< A: the checkpoint to check
    std::optional<std::string> b;           ///< B: the reference; none with --lora_update
    bool loraUpdate = false;                ///< compare A's fused model with its base weights
    std::optional<std::string> atol;        ///< (0)
    std::optional<std::string> rtol;        ///< (0)
    bool json = false;
    bool failuresOnly = false;
    bool quiet = false;
    std::optional<std::string> hfModelPath;  ///< A's config folder
    std::optional<std::string> hfModelPathB; ///< B's config folder
    std::optional<std::string> threads;
    std::optional<std::string> lora;         ///< --lora: how a LoRA checkpoint is read (both)
    std::optional<std::string> loraAlpha;    ///< --lora_alpha
    bool useRslora = false;                  ///< --use_rslora
    std::optional<std::string> baseModel;    ///< --base_model, for an adapter-only A
    std::optional<std::string> dtype;        ///< --dtype: A's floating tensors as a merge with it writes them
    bool roundToNarrower = false;            ///< --round_to_narrower: compare as `tessera test` compares

    static ArgParser parser();
    static DiffRequest fromParser(const ArgParser& parsed);
    /// The words after `tessera diff`, read as the command line reads them; the error is the usage error.
    static Result<DiffRequest> fromArgs(const std::vector<std::string>& args);
    /// The words after `tessera diff` that make this request: A and B, then each flag given.
    std::vector<std::string> toArgs() const;
    /// Every check of the flags that needs nothing read; an error is a usage error.
    Status validate() const;

    bool silent() const { return json || quiet; }
    auto fields() const
    {
        return std::tie(a, b, loraUpdate, atol, rtol, json, failuresOnly, quiet, hfModelPath, hfModelPathB, threads,
                        lora, loraAlpha, useRslora, baseModel, dtype, roundToNarrower);
    }
    bool operator==(const DiffRequest& other) const { return fields() == other.fields(); }
    bool operator!=(const DiffRequest& other) const { return !(*this == other); }
};

/// The comparison the flags ask for (tolerances, threads), checked in the command line's order (the LoRA flags
/// too).
Result<DiffOptions> diffSettings(const DiffRequest& request);

/// How the LoRA flags ask a LoRA checkpoint to be read (its `base` left for the caller to read); the error is a
/// usage error naming the flag.
Result<LoraReading> diffLoraReading(const DiffRequest& request);

/// The diff that shows `test`'s comparison tensor by tensor: its checkpoint as A, its reference as B, and the
/// same config folder, tolerances and LoRA flags, so both give one answer.
DiffRequest diffRequestOfTest(const TestRequest& test);

} // namespace tessera
