// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera merge` as data: every flag of its command line, read from argv or from the workbench's Merge page.

#include "merge/gguf_plan.h"
#include "ops/arg_parser.h"
#include "ops/model_request.h"
#include "ops/part_request.h"
#include "result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct MergeRequest : ModelRequest, PartRequest {
    std::optional<std::string> format;        ///< --format safetensors | gguf
    std::optional<std::string> outtype;       ///< --outtype (gguf)
    std::optional<std::string> name;          ///< --name (gguf)
    std::optional<std::string> targetDir;     ///< --target_dir ("tmp", as verl's merger)
    std::optional<std::string> maxShardSize;  ///< --max_shard_size (5GB)
    std::optional<std::string> weightsFrom;   ///< --weights_from model | optimizer
    bool dryRun = false;
    bool verifyReplicas = false;
    bool tensors = false;                     ///< --tensors: list every tensor with --dry-run
    std::optional<std::string> peftTargetDir; ///< --peft_target_dir
    bool saveIntermediate = false;
    std::optional<std::string> hfUploadPath;  ///< refused with the upload command to run instead
    bool privateRepo = false;                 ///< --private, accepted for verl's scripts

    /// The parser of `tessera merge`: its flags, synopsis and --help.
    static ArgParser parser();
    /// The request a successful parse of parser() holds.
    static MergeRequest fromParser(const ArgParser& parsed);
    /// The words after `tessera merge` read as the command line reads them; the error is the usage error.
    static Result<MergeRequest> fromArgs(const std::vector<std::string>& args);
    /// The words after `tessera merge` that make this request: each flag given, as fromArgs() reads it back.
    std::vector<std::string> toArgs() const;
    /// Every check of the flags that needs nothing read (values, names, combinations, the part this process is);
    /// an error is a usage error. prepareMerge() makes them too.
    Status validate(const EnvLookup& env = processEnvironment()) const;

    /// --format gguf.
    bool gguf() const { return format.value_or("safetensors") == "gguf"; }
    std::string target() const { return targetDir.value_or("tmp"); }

    bool operator==(const MergeRequest& other) const;
    bool operator!=(const MergeRequest& other) const { return !(*this == other); }
};

/// The merge flags read (besides the model's).
struct MergeSettings {
    GgufOptions ggufOptions;                 ///< --outtype and --name (the rest comes from the model)
    std::uint64_t maxShardSize = 5'000'000'000;
    std::optional<PartSpec> part;
};

/// Checks and converts the flags of `request` that are not the model's, and the model's (in the command line's
/// order). The target's name is not checked here (an empty one is a target problem, see PreparedMerge::target).
Result<std::pair<ModelSettings, MergeSettings>> mergeSettings(const MergeRequest& request, const EnvLookup& env);

} // namespace tessera
