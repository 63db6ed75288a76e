// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The way back: a model (the tensors a merge would write, read from a Hugging Face folder or any checkpoint
// Tessera reads) laid out as a distributed checkpoint. The plan says, before anything is read, which file holds
// which box of which tensor; the engine (split_engine.h) then streams it.

#include "merge/merge_plan.h"
#include "model/checkpoint.h"
#include "pickle/pickle_value.h"
#include "pickle/torch_save_writer.h"
#include "result.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// The distributed layouts split writes.
enum class SplitFormat {
    Fsdp,     ///< verl's FSDP2 actor folder: model_world_size_N_rank_R.pt of DTensors
    Dcp,      ///< a PyTorch Distributed Checkpoint folder (.metadata + __R_0.distcp), keys as in the model
    Megatron, ///< verl's Megatron actor folder: model/mp_rank_XX[_YYY][_ZZZ]/model.pt with Megatron-core names
    MegatronDist, ///< Megatron-core torch_dist in verl's dist_ckpt/: a DCP folder of layer-stacked tensors
};

/// "fsdp", "dcp", "megatron", "megatron-dist".
const char* splitFormatName(SplitFormat format);
Result<SplitFormat> splitFormatFromName(const std::string& name);

/// A device mesh as users type it: "2x4", "2,4", "2×4" or "8".
Result<Shape> parseMeshShape(const std::string& text);
/// Mesh dim names as users type them: "ddp,fsdp".
std::vector<std::string> parseMeshDimNames(const std::string& text);

/// N when `target` is verl's RUN/global_step_N/actor, whose RUN/latest_checkpointed_iteration.txt names the
/// newest step; nullopt otherwise.
std::optional<std::int64_t> verlRunIteration(const std::string& target);

/// What the user asked of a split.
struct SplitOptions {
    SplitFormat format = SplitFormat::Fsdp;
    int worldSize = 0;                      ///< ranks; 0 = the product of `mesh`
    Shape mesh;                             ///< FSDP device mesh (e.g. {2, 2}); empty = {worldSize}
    std::vector<std::string> meshDimNames;  ///< empty = ("fsdp",), or ("ddp", "fsdp") for a 2-D mesh
    /// When the target is verl's run layout (…/global_step_N/actor), the iteration written to
    /// latest_checkpointed_iteration.txt at the run root; nullopt = not a run layout.
    std::optional<std::int64_t> runIteration;
    /// List each file's keys in the model's module order (moduleOrder()) rather than the source's: for a
    /// Hugging Face folder, whose safetensors files keep their keys sorted by name.
    bool moduleOrder = false;
    // Megatron: the parallel sizes and how the vocabulary is padded.
    int tp = 1, pp = 1, vpp = 1, ep = 1;
    /// Uneven pipeline stages (Megatron's num_layers_in_first/last_pipeline_stage): the layers of the first and
    /// of the last stage; the rest split evenly over the stages between. nullopt = an even split.
    std::optional<std::int64_t> firstStageLayers, lastStageLayers;
    int vocabDivisibleBy = 128;           ///< Megatron's make_vocab_size_divisible_by (padded to a multiple of it × TP)
    /// Megatron-LM's own layout instead of verl's: ITER/mp_rank_…/model_optim_rng.pt with args, where ITER is
    /// iter_NNNNNNN for `iteration` or "release" without one, and latest_checkpointed_iteration.txt beside it.
    bool megatronLm = false;
    std::optional<std::int64_t> iteration;
    std::string userRulesFile;            ///< --param_mapping: rules layered over the built-in family
    std::optional<std::string> userRulesText; ///< that file's text as an editor holds it, read instead of the file
};

/// One box of a model tensor copied into an output tensor.
struct SplitFragment {
    std::size_t source = 0;   ///< index into MergePlan::tensors
    Shape sourceOffsets;      ///< where the box starts in the model tensor
    Shape shape;              ///< box shape
    Shape localOffsets;       ///< where it starts in the output (local) tensor
    /// Set when the box lies in the local tensor with strides of its own (a q, k or v block inside Megatron's
    /// fused linear_qkv): its first element's offset and its element strides there; localOffsets is then unused.
    std::optional<std::uint64_t> localElement;
    Shape localStrides;
    /// The index space sourceOffsets and shape are in when it is not the model tensor's shape but a finer view of
    /// the same row-major elements (TensorInfo::savedShape: GPT-OSS's interleaved [.., 2I] boxed as [.., I, 2]).
    /// Empty = the model tensor's shape.
    Shape sourceBoxShape;
};

/// One tensor of an output file: a rank's local shard.
struct SplitTensor {
    /// Key, dtype, local shape, padded storage, DTensor spec. The mesh's rank list is SplitPlan::meshRanks, given
    /// to the spec only while its file's pickle is written (a copy per tensor and rank would not fit in memory on
    /// thousands of ranks).
    TorchSaveTensor spec;
    std::vector<SplitFragment> fragments; ///< together they fill the local tensor exactly
    Shape globalShape;                    ///< the model tensor's shape
    Shape chunkOffsets;                   ///< DCP: the chunk's offsets in the global tensor (as torch records them)
    std::uint64_t bytes() const;          ///< the local tensor's bytes (without storage padding)
};

/// One file of the output.
struct SplitFile {
    enum class Kind {
        StateDict, ///< one torch.save archive of an ordered state dict
        DcpItems,  ///< DCP data: one torch.save archive per tensor, back to back
    };
    std::string name;                     ///< relative to the target ("model_world_size_4_rank_0.pt")
    Kind kind = Kind::StateDict;
    std::string archiveName;              ///< torch.save's record folder (the file stem, or "archive")
    int rank = 0;
    std::vector<SplitTensor> tensors;     ///< in key order
    /// A list of state dicts instead of one (verl's Megatron model.pt, one per virtual pipeline stage): how many
    /// of `tensors` each holds, in order. Empty: one state dict.
    std::vector<std::size_t> listChunks;
    /// With listChunks: the state dicts sit in a dict under these keys ("model", or "model0", "model1", …) beside
    /// `rootItems` (pickled key/value pairs such as Megatron-LM's args and iteration), not in a list.
    std::vector<std::string> chunkKeys;
    std::string rootItems;
    /// The whole value as a tree whose tensors are placeholders for `tensors` (an optimizer's state dict; see
    /// TorchSaveWriter::Value::Tree); null for a state dict.
    PyRef tree;
    std::uint64_t bytes = 0;              ///< storage bytes, padding included
};

struct TrainingSplit;

/// Everything a split will do, computed from the model's description alone.
struct SplitPlan {
    SplitFormat format = SplitFormat::Fsdp;
    std::string layout;                   ///< "FSDP2, world size 4, Shard(0) on fsdp=4"
    int worldSize = 0;
    Shape mesh;
    std::vector<std::string> meshDimNames;
    std::vector<std::int64_t> meshRanks;  ///< the DTensors' device mesh ranks, row-major (FSDP)
    std::vector<SplitFile> files;
    /// Files written from memory (path relative to the target → content): fsdp_config.json, …
    std::vector<std::pair<std::string, std::string>> generatedFiles;
    /// torch.save archives of tensor-free values (path relative to the target → the value's pickle): common.pt.
    std::vector<std::pair<std::string, std::string>> generatedPickles;
    /// The folder (relative to the target) of the DCP data and its .metadata, for plans with DcpItems files.
    std::string dcpFolder;
    /// The file published last, whose presence makes the folder a checkpoint (fsdp_config.json, .metadata, …).
    std::string keystone;
    ConfigFolder config;                  ///< where config and tokenizer files come from; config.files are copied
    std::string sideFolder;               ///< where they go ("huggingface"; "" = the target itself)
    std::optional<std::int64_t> runIteration;
    std::uint64_t totalBytes = 0;         ///< tensor bytes written (padding included)
    std::uint64_t diskBytes = 0;          ///< estimated bytes on disk
    std::uint64_t largestTensorBytes = 0; ///< the largest model tensor
    std::uint64_t memoryBytes = 0;        ///< estimated peak memory of the engine
    std::vector<std::string> warnings;
    /// The training state carried with the model (an FSDP run's optimizer, scheduler and random state), or null.
    std::shared_ptr<const TrainingSplit> training;
    /// Top-level names the split creates in the target, in publish order (data first, keystones last).
    std::vector<std::string> topLevelNames() const;
};

/// Plans writing `model` (a merge plan: the tensors, their dtypes and the config files) as `options` asks.
/// Refuses what the layout cannot express, with every reason listed.
Result<SplitPlan> planSplit(const MergePlan& model, const SplitOptions& options);

/// The plan as JSON for `tessera split --dry-run --json`.
nlohmann::json splitPlanToJson(const SplitPlan& plan, const MergePlan& model);
/// A readable summary; `listTensors` adds one line per output tensor of the first file.
std::string splitPlanSummary(const SplitPlan& plan, const MergePlan& model, bool listTensors);

} // namespace tessera
