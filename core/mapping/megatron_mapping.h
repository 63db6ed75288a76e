// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Megatron names → Hugging Face names. A Megatron CheckpointInfo (global tensors with Megatron names, from the
// readers) becomes a CheckpointInfo with Hugging Face names whose pieces are sub-boxes of the source pieces:
// fused QKV split per query group, GLU fc1 halves, vocabulary padding dropped, torch_dist's layer and expert
// axes unstacked. No value is ever computed, so planMerge()/mergeCheckpoint() write it bit-exact and streaming.
// The mapping table (every source, every expected parameter, and what became of it) is kept for display.

#include "formats/layout_registry.h" // isMegatronLayout(): the layouts this mapping is for
#include "model/checkpoint.h"
#include "result.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// What the user asked of the mapping.
struct MappingOptions {
    std::string configDir;            ///< config.json folder; empty = CheckpointInfo::hfConfigDir
    std::string userRulesFile;        ///< --param_mapping: a rules file layered over the built-in family
    /// The rules file's text as an editor holds it (unsaved): layered instead of reading userRulesFile, which then
    /// only names it in messages.
    std::optional<std::string> userRulesText;
    std::string ignoreMissing;        ///< --ignore_missing_params: a regex (RE2) found in the names not to require
    bool strict = true;               ///< unmapped sources and missing parameters are problems (else warnings)
    std::optional<bool> valueModel;   ///< --is-value-model; nullopt = a [1, hidden] output_layer says so
    bool tieWordEmbeddings = false;   ///< --tie-word-embedding: treat the embeddings as tied whatever config.json says
};

/// What became of one source tensor or expected parameter.
enum class MappingStatus {
    Ok,            ///< mapped, and the shape is what config.json gives
    Unmapped,      ///< a source tensor no rule maps
    Missing,       ///< an expected parameter no source fills
    ShapeMismatch, ///< mapped, but the shape is not what config.json gives (or the transform cannot apply)
    Ignored,       ///< unmapped or missing, but --ignore_missing_params covers it
    Duplicate,     ///< two sources map to the same name
    Unexpected,    ///< mapped to a name the architecture does not have under this config
    Tied,          ///< lm_head.weight of tied embeddings: the merge drops it after checking it equals the embedding
};

/// "ok", "unmapped", "missing", "shape mismatch", "ignored", "duplicate", "unexpected", "tied".
const char* mappingStatusName(MappingStatus status);

/// One line of the mapping table.
struct MappingRow {
    std::string source;               ///< Megatron name; "name[3]" for layer 3 of a stacked tensor; empty when missing
    std::string target;               ///< Hugging Face name; empty when unmapped
    std::string rule;                 ///< rule id ("qkv_weight"); empty when none applies
    std::string ruleOrigin;           ///< the file defining it
    std::string transform;            ///< "unstack_layers + split_qkv"
    Shape sourceShape;                ///< the source tensor's global shape (stacked, for torch_dist)
    Shape targetShape;                ///< what the transform produces
    std::optional<Shape> expectedShape; ///< what config.json gives, when the name is expected
    MappingStatus status = MappingStatus::Ok;
    std::string detail;               ///< why, for anything but Ok
};

/// The whole mapping.
struct MappingResult {
    std::string family;                 ///< rule family used ("qwen2")
    std::vector<std::string> ruleSources; ///< rule files, base first
    std::string configPath;             ///< the config.json the sizes came from
    bool valueModel = false;
    bool tiedEmbeddings = false;
    std::vector<MappingRow> rows;       ///< sources in checkpoint order, then missing parameters
    std::vector<Problem> problems;      ///< mapping problems (the source's own stay in mapped.problems too)
    std::vector<std::string> warnings;  ///< what --no-strict let through, trimmed vocabulary, …
    CheckpointInfo mapped;              ///< Hugging Face names, in the model's order; problems = source + mapping
    std::size_t count(MappingStatus status) const;
};

/// Maps `source` (a Megatron layout) to Hugging Face names. An Error only when no mapping can be tried: no
/// config.json, no rules for its architecture, a broken rules file, a bad --ignore_missing_params regex.
/// Everything about individual tensors is in the rows and problems.
Result<MappingResult> mapMegatronToHf(const CheckpointInfo& source, const MappingOptions& options);

} // namespace tessera
