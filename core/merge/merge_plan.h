// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "merge/hf_output.h"
#include "model/checkpoint.h"
#include "model/dtype.h"
#include "model/lora_delta.h"
#include "result.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// What the user asked of a merge.
struct MergeOptions {
    std::optional<DType> dtype;                        ///< --dtype: convert floating tensors; nullopt keeps each dtype
    std::uint64_t maxShardSize = 5'000'000'000;        ///< --max_shard_size, bytes (Hugging Face's "5GB")
    bool forceTieWordEmbeddings = false;               ///< --tie-word-embedding: tie even if config.json does not say so
    std::string hfConfigDir;                           ///< --hf_model_path: overrides CheckpointInfo::hfConfigDir
    unsigned threads = 1;                              ///< only used for the memory estimate
    /// Writes PEFT names as they are (an adapter's own file); otherwise a PEFT name not consumed by a delta is
    /// refused, since it would put the adapter-wrapped model under the wrong names.
    bool keepPeftNames = false;
    /// Warn when no config.json is found (a model without one cannot be loaded; an adapter folder has none).
    bool expectConfig = true;
    /// One file of this name (e.g. "adapter_model.safetensors"), never sharded; empty: Hugging Face's shards.
    std::string singleFileName;
    /// Files the merge writes from memory (name → content), e.g. an adapter_config.json.
    std::vector<std::pair<std::string, std::string>> generatedFiles;
};

/// How a tensor's bytes get into the output file.
enum class CopyMode {
    Direct, ///< every piece is one contiguous range of the output: streamed straight from the source file
    Gather, ///< pieces are strided in the output: assembled in a tensor-sized buffer, then written once
    Sum,    ///< Partial placement: terms summed in fp32 in a buffer, converted back, then written
};

/// "direct", "gather", "sum", as plans and logs name them.
const char* copyModeName(CopyMode mode);

struct PlannedDelta;

/// One output tensor: where it comes from and where it goes.
struct PlannedTensor {
    std::string name;
    std::size_t source = 0;              ///< index into CheckpointInfo::tensors
    DType sourceDtype = DType::Unknown;
    DType dtype = DType::Unknown;        ///< dtype written
    Shape shape;
    std::uint64_t bytes = 0;             ///< bytes written
    std::size_t file = 0;                ///< index into MergePlan::files
    std::uint64_t fileOffset = 0;        ///< absolute offset of the tensor's first byte in that file
    CopyMode mode = CopyMode::Direct;
    std::vector<std::size_t> pieces;     ///< pieces read (Primary and PartialTerm, non-empty), indices into TensorInfo::pieces
    /// (Replica piece, Primary piece with the same box), for --verify-replicas.
    std::vector<std::pair<std::size_t, std::size_t>> replicas;
    std::uint64_t bufferBytes = 0;       ///< memory the copy needs (0 for Direct)
    /// A LoRA update added to the assembled weight (the tensor is then built whole in memory, like a Gather).
    std::shared_ptr<const PlannedDelta> delta;
};

/// The factors of a LoRA update and how they are read (each in fp32, whole: they are r rows or columns).
struct PlannedDelta {
    TensorInfo a, b;
    PlannedTensor aCopy, bCopy;
    double scale = 1;
    bool transposed = false;
};

/// One output safetensors file.
struct PlannedFile {
    std::string name;                    ///< "model.safetensors" or "model-00001-of-00003.safetensors"
    std::uint64_t size = 0;
    std::string header;                  ///< the bytes at [0, data start)
    std::vector<std::size_t> tensors;    ///< indices into MergePlan::tensors, in file order
};

/// A tied output weight that is not written, and the weight it must equal.
struct TieCheck {
    std::size_t dropped = 0;             ///< index into CheckpointInfo::tensors (lm_head.weight)
    std::size_t kept = 0;                ///< index into CheckpointInfo::tensors (the input embedding)
    /// Tied by --tie-word-embedding against config.json: a head that differs would change the model, so it is
    /// an error rather than a warning.
    bool forced = false;
};

/// Everything a merge will do, computed from the checkpoint description alone (no tensor data read).
struct MergePlan {
    std::string checkpoint;              ///< CheckpointInfo::root
    std::string layout;
    ConfigFolder config;                 ///< where config/tokenizer files come from; config.files are copied
    std::vector<std::pair<std::string, std::string>> generatedFiles; ///< written from memory (name → content)
    std::optional<DType> configDtype;    ///< set when config.json's torch_dtype is rewritten
    bool configTied = false;             ///< config.json gets tie_word_embeddings: true (--tie-word-embedding)
    bool configDequantized = false;      ///< config.json loses quantization_config: the weights are unquantized
    std::vector<PlannedTensor> tensors;  ///< in the checkpoint's order (the state dict order Hugging Face shards by)
    std::vector<PlannedFile> files;
    std::string indexJson;               ///< model.safetensors.index.json, empty for a single file
    std::uint64_t totalBytes = 0;        ///< tensor bytes (the index's metadata.total_size)
    std::uint64_t diskBytes = 0;         ///< every byte written: files, index and side files
    std::uint64_t bufferBytes = 0;       ///< the largest Gather/Sum buffer: the engine's memory budget
    std::uint64_t memoryBytes = 0;       ///< estimated peak memory for the options' thread count
    std::uint64_t largestTensorBytes = 0;
    std::vector<TieCheck> tieChecks;
    /// What config.json becomes in the output.
    ConfigEdits configEdits() const { return { configDtype, configTied, configDequantized }; }
    std::vector<std::string> dropped;    ///< "lm_head.weight (tied to model.embed_tokens.weight)"
    std::size_t fusedTensors = 0;        ///< weights with a LoRA update added
    std::vector<std::string> warnings;

    /// Names of every file the merge writes into the target folder, in publish order (weights first).
    std::vector<std::string> outputFileNames() const;
};

/// Staging size per thread for streamed dtype conversion and replica checks.
inline constexpr std::uint64_t kMergeChunkBytes = 16u << 20;

/// Plans the merge of `info`. Refuses (with every reason listed) a checkpoint with problems, Megatron
/// layouts (their names need mapping), PEFT/LoRA names, Partial placements other than sum or on integer
/// tensors, and dtypes safetensors cannot store.
Result<MergePlan> planMerge(const CheckpointInfo& info, const MergeOptions& options);

/// Plans how one tensor is assembled in `dtype` (nullopt: its own dtype; only floating tensors convert),
/// without a place in a file. Used by planMerge() and to read tensors for comparisons.
Result<PlannedTensor> planTensorCopy(const TensorInfo& tensor, std::size_t index, std::optional<DType> dtype);

/// The plan as JSON for `tessera merge --dry-run --json`.
nlohmann::json mergePlanToJson(const MergePlan& plan, const CheckpointInfo& info);

/// A readable summary of the plan; `listTensors` adds one line per tensor.
std::string mergePlanSummary(const MergePlan& plan, const CheckpointInfo& info, bool listTensors);

/// True when `name` is a PEFT/LoRA key (`base_layer`, `lora_A`, `lora_B`, `lora_embedding_*`, `lora_magnitude_vector`).
bool isPeftTensorName(const std::string& name);

} // namespace tessera
