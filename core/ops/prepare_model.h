// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The first half of every prepare…(): the checkpoint a request names read, checked against its config.json, its
// Megatron names mapped, a LoRA adapter read with its base model, and the model planned. What the caller shows
// (messages, the mapping table, why it stops) comes back with it.

#include "mapping/lora.h"
#include "mapping/megatron_mapping.h"
#include "merge/lora_plan.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "model/checkpoint.h"
#include "ops/model_request.h"
#include "progress.h"
#include "result.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

/// Why a request stops before anything is written.
struct Refusal {
    Error error;
    /// The request itself is wrong (a flag that does not apply: exit code 2), not what it names (exit code 1).
    bool usage = false;
};

/// A line to show beside the plan, in the order it was found.
struct PrepareMessage {
    enum class Kind { Note, Warning };
    Kind kind = Kind::Note;
    std::string text;
};

/// A checkpoint already read: the workbench's loaded one, or one an earlier prepare read. Prepare uses it instead
/// of reading `path` again when the request reads the same path the same way.
struct ScannedCheckpoint {
    std::shared_ptr<const CheckpointInfo> info;
    std::string path;               ///< what was read, as a request names it
    std::string hfModelPath;        ///< the --hf_model_path it was read with ("": found next to it)
    /// checkExpectedParameters() with the default options was applied (the workbench's scan does): reused as it is
    /// for requests with those options, read again for others.
    bool parametersChecked = false;
};

/// Rules of --param_mapping as an editor holds them, unsaved: used instead of reading the file.
struct EditedRules {
    std::string text;
    std::string origin; ///< how messages name them: the file, or "rules editor"
};

/// What a prepare…() may use besides the request.
struct PrepareContext {
    Progress* progress = nullptr;          ///< scans report files here; cancel stops the prepare
    std::vector<ScannedCheckpoint> scans;  ///< checkpoints already read
    std::optional<EditedRules> rules;
};

/// The model a merge, test or split writes, and everything found on the way.
struct PreparedModel {
    ModelSettings settings;
    /// Scans this prepare read itself (as read, before any check): a caller keeps them for the next prepare.
    std::vector<ScannedCheckpoint> scans;
    std::shared_ptr<const CheckpointInfo> checkpoint;   ///< --local_dir as read and checked against config.json
    std::shared_ptr<const MappingResult> mapping;       ///< Megatron: the name mapping; null for other layouts
    std::shared_ptr<const CheckpointInfo> input;        ///< under Hugging Face names: what is planned
    std::shared_ptr<const CheckpointInfo> base;         ///< --base_model as read and checked
    std::shared_ptr<const LoraCheckpoint> lora;         ///< a LoRA checkpoint, read
    MergeOptions options;                               ///< what the plans were made with
    std::optional<MergePlan> plan;                      ///< an ordinary checkpoint's
    std::optional<LoraMergePlans> loraPlans;            ///< a LoRA checkpoint's
    std::vector<PrepareMessage> messages;
    std::vector<std::pair<std::string, double>> stageSeconds; ///< "scan", "map", "plan": how long each took
    std::optional<Refusal> refusal;

    bool planned() const { return plan || loraPlans; }
    /// The models and where they go in the target, for mergeCheckpoints(); they point into this object.
    std::vector<MergeOutput> outputs() const;
    /// The model a test compares and a split writes: the fused one when there is one, else the adapter.
    const MergePlan& primary() const { return plan ? *plan : loraPlans->primary(); }
    const CheckpointInfo& primaryInfo() const { return plan ? *input : loraPlans->primaryInfo(*lora); }
};

/// What differs between merge, test and split in reading the model.
struct ModelPurpose {
    /// `test`: a folder that is already a Hugging Face model is compared as it is, whatever --backend says.
    bool mergedFolderIsFine = false;
    /// `split`: the model must be a Hugging Face folder (--hf_dir).
    bool huggingFaceOnly = false;
    std::string huggingFaceFlag = "--hf_dir";
};

/// Reads the model `request` names (its settings already checked): scan, backend check, the expected-parameter
/// check, the Megatron mapping, the LoRA adapter with its base model. Stops at the first refusal.
PreparedModel readModel(const ModelRequest& request, const ModelSettings& settings, const ModelPurpose& purpose,
                        const PrepareContext& context);

/// Plans `model` (read by readModel()) with `options` (dtype, shard size, config folder; the thread count and
/// the rest are taken from the request) as `loraOutput` asks.
void planModel(PreparedModel& model, MergeOptions options, LoraOutput loraOutput);

} // namespace tessera
