// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera merge --format gguf`: the model as one GGUF file for llama.cpp. The checkpoint's tensors (under their
// Hugging Face names) are described again under llama.cpp's names, with q/k rows permuted for the `llama`
// architecture and experts stacked, by re-indexing their stored boxes; the ordinary merge engine then streams
// them into the file at the offsets of the GGUF layout.

#include "formats/gguf_file.h"
#include "formats/gguf_mixture.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "model/checkpoint.h"
#include "result.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct GgufOptions {
    std::optional<GgufOutType> outType;  ///< --outtype (formats/gguf_types.h); nullopt: kDefaultGgufOutType
    std::string name;                    ///< general.name and the file name's stem; default: from the folders
    std::string hfConfigDir;             ///< overrides CheckpointInfo::hfConfigDir
    bool forceTieWordEmbeddings = false; ///< --tie-word-embedding
    unsigned threads = 1;                ///< for the memory estimate
};

/// One tensor of the GGUF file.
struct GgufPlannedTensor {
    GgufTensorInfo info;                 ///< name, ggml dims, ggml type, offset in the data section, bytes
    std::vector<std::string> sources;    ///< the Hugging Face tensors it is made of
    std::string transform;               ///< "", "rotary permutation (4 heads)", "8 experts stacked", "generated"
    std::size_t viewIndex = 0;           ///< index into GgufPlan::view.tensors (not for generated tensors)
    bool keptF32 = false;                ///< F32 whatever the output type: generated, 1-D, a norm or the router

    /// Its ggml type's row in the table of types (formats/gguf_types.h): geometry, quantizer.
    const GgmlTypeInfo& typeInfo() const { return ggmlType(static_cast<GgmlType>(info.type)); }
};

/// A tensor the export quantizes: assembled in its own dtype as `copy` says, quantized into blocks of `type`, and
/// written at copy.fileOffset.
struct GgufQuantizedTensor {
    PlannedTensor copy;                  ///< how it is assembled (copy.bytes: in its dtype) and where it goes
    GgmlType type = GgmlType::Q8_0;      ///< its blocks (formats/gguf_types.h: geometry and quantizer)
    std::uint64_t bytes = 0;             ///< its bytes in the file, whole blocks of `type`
};

/// A tensor computed by the export itself (llama 3's rope_freqs), written from memory.
struct GgufGeneratedTensor {
    std::uint64_t fileOffset = 0;
    std::string bytes;
};

struct GgufPlan {
    std::string architecture;            ///< "llama", "qwen2", …
    GgufMixtureModel mixtureModel;       ///< what a quantized type's mixture reads (formats/gguf_mixture.h)
    GgufOutType outType = kDefaultGgufOutType;
    std::string fileName;                ///< "<name>-<outtype>.gguf"
    std::string modelName;               ///< general.name
    ConfigFolder config;                 ///< the config and tokenizer folder; embeddedFiles are read from it
    CheckpointInfo view;                 ///< the tensors under GGUF names, pieces re-indexed into the source files
    /// The file and the tensors written as plain floats, in the merge engine's terms (the file's header is the
    /// GGUF header; offsets are the GGUF data offsets).
    MergePlan merge;
    std::vector<GgufQuantizedTensor> quantized; ///< tensors of a quantized type, written after the streamed ones
    std::vector<GgufGeneratedTensor> generated;
    std::vector<GgufPlannedTensor> tensors; ///< in file order
    std::vector<GgufKeyValue> metadata;
    std::string tokenizerSummary;
    std::vector<std::string> embeddedFiles; ///< the config folder's files read into the metadata
    std::vector<std::string> dropped;    ///< "lm_head.weight (tied to model.embed_tokens.weight)"
    std::vector<std::string> warnings;
    std::uint64_t fileSize = 0;
    std::uint64_t memoryBytes = 0;       ///< estimated peak memory of the tensor buffers
    std::uint64_t largestTensorBytes = 0;

    /// What the export publishes, the GGUF file first: it and the Modelfile beside it (merge.generatedFiles).
    std::vector<std::string> outputFileNames() const { return merge.outputFileNames(); }
};

/// Plans the GGUF export of `info` (Hugging Face names: a safetensors folder, an FSDP/DCP checkpoint, or a
/// Megatron checkpoint after mapping). Refuses, with every reason, what llama.cpp's architectures cannot express
/// (an unknown architecture, tensors with no llama.cpp name, missing experts, heads that do not divide the rows)
/// and a folder without a tokenizer it can convert. Nothing is read but headers, config and tokenizer files.
Result<GgufPlan> planGgufMerge(const CheckpointInfo& info, const GgufOptions& options);

/// The size of the file this export would write as each output type, in ggufOutTypes() order: the same header,
/// each tensor typed by that type's rules (its quantization mixture and fallbacks) and laid out as the plan is, so
/// the size shown for a type is the size that type's plan would report; 0 for a type whose mixture refuses the
/// model.
std::vector<std::pair<GgufOutType, std::uint64_t>> ggufFileSizesByType(const GgufPlan& plan);

/// How many of the plan's tensors are of one ggml type, and their bytes in the file.
struct GgmlTypeCount {
    std::uint32_t type = 0;              ///< GgmlType's number (ggmlTypeName() names it)
    std::size_t tensors = 0;
    std::uint64_t bytes = 0;
};

/// The file's mix of ggml types, counted once for the dry run and the workbench: the type holding the most bytes
/// first (a q4_k_m file reads Q4_K, Q6_K, F32).
std::vector<GgmlTypeCount> ggufTypeCounts(const GgufPlan& plan);
/// The mix as one line: "Q4_K ×150, Q6_K ×27, F32 ×65".
std::string ggufTypeCountsText(const GgufPlan& plan);

/// A readable summary for --dry-run; `listTensors` adds one line per tensor.
std::string ggufPlanSummary(const GgufPlan& plan, bool listTensors);

/// The plan as JSON for --dry-run --json.
nlohmann::json ggufPlanToJson(const GgufPlan& plan);

/// Refuses a target the export cannot complete (not a folder, not writable, its file name taken by a folder,
/// too little free disk), before anything is written.
Status checkGgufTarget(const GgufPlan& plan, const std::string& targetDir);

/// Which of the export's tensors one run writes: all of them (writeGgufFile()), or one part's of an export split
/// across processes (merge/gguf_parts.h), whose last part writes only what needs the complete set.
struct GgufSelection {
    const std::vector<bool>* plain = nullptr;     ///< per GgufPlan::merge.tensors; nullptr: all
    const std::vector<bool>* quantized = nullptr; ///< per GgufPlan::quantized; nullptr: all
    bool finish = true;                           ///< the header and the generated tensors
};

/// Writes the selected tensors of the GGUF file into the existing folder `dir`: its file is created and sized
/// when missing and never truncated when a selection is given, so several processes can fill it; blocks written
/// are told to `options.onTensorBytes`. Flushed, not published: writeGgufFile() is the user-facing export.
/// `bytesWritten` counts the selected tensors' bytes as they lie in the file.
Result<MergeOutcome> writeGgufTensors(const GgufPlan& plan, const std::string& dir, const GgufSelection& selection,
                                      const MergeRunOptions& options);

/// Writes the GGUF file into `targetDir` atomically (a hidden temporary folder, published when complete; dead
/// runs' folders removed first), streaming tensor by tensor with the merge engine: progress, cancel, bounded
/// memory. Quantized tensors are quantized on `options.threads` threads.
Result<MergeOutcome> writeGgufFile(const GgufPlan& plan, const std::string& targetDir, const MergeRunOptions& options);

} // namespace tessera
