// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/dtype.h"
#include "model/lora_delta.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

using Shape = std::vector<std::int64_t>;

/// "[512, 64]", for messages and reports.
std::string shapeToString(const Shape& shape);

/// The element count of a shape: 0 when any dimension is 0 or negative, whatever the others are (a header may
/// pair a 0 with huge dimensions; the readers bound the product of the non-zero ones), else their product.
std::uint64_t shapeNumel(const Shape& shape);

/// How a piece contributes to its tensor.
enum class PieceRole {
    Primary,     ///< the piece provides these elements
    Replica,     ///< an identical copy of a Primary piece with the same box (Replicate placement)
    PartialTerm, ///< one addend of a Partial placement: the elements are the sum of all terms with the same box
};

/// How a piece's bytes hold its elements.
enum class PieceEncoding {
    Plain, ///< one `storedDtype` value per element
    /// ggml's quantized blocks (a GGUF file's Q8_0 tensor): every `blocks.elements` consecutive elements are one
    /// `blocks.bytes`-byte block of ggml type `blocks.ggmlType`, read as the float32 values llama.cpp dequantizes them
    /// to (`storedDtype` is Float32). A box of such a piece must cover whole blocks: its innermost dimension whole
    /// rows of a multiple of `blocks.elements` elements.
    GgmlBlocks,
    /// OCP's MXFP4 as transformers stores GPT-OSS's experts (`<name>_blocks`, `<name>_scales`): every 32 consecutive
    /// elements are 16 bytes of 4-bit E2M1 codes (low nibble first) in `file`, sharing one E8M0 scale byte (2^(s−127))
    /// at `scaleOffset` + block index in `scaleFile`; read as the float32 values transformers dequantizes them to
    /// (`storedDtype` is Float32). The piece's first element starts a block.
    MXFP4,
};

/// The blocks of an encoded piece, as its reader's table of types describes them (formats/gguf_types.h for ggml's
/// types, formats/mxfp4.h for MXFP4): the reader copies them into the piece, so the model finds a piece's bytes
/// without knowing any format's types, and the merge stage decodes it through the same table.
struct PieceBlocks {
    const char* name = "";       ///< "Q8_0", "MXFP4": static text of that table, for reports
    std::uint32_t ggmlType = 0;  ///< GgmlBlocks: ggml's number of the type
    std::uint64_t elements = 1;  ///< values per block
    std::uint64_t bytes = 0;     ///< bytes per block in `file` (MXFP4: the codes; each block's scale byte lies apart)
};

/// One box of a logical tensor stored somewhere on disk.
///
/// The box is `shape` elements starting at `offsets` in the global tensor. Its bytes are in `file`:
/// element (i0, i1, …) of the box is element `Σ i_k·strides_k` of the data at byte `dataOffset`, which for a
/// Plain piece is at byte `dataOffset + Σ i_k·strides_k·dtypeSize(storedDtype)` (see storedByteOffset()).
/// `storageBegin`/`storageBytes` is the storage record the data must stay inside (checked by readers).
struct Piece {
    std::string file;                ///< absolute path of the file holding the bytes
    int rank = -1;                   ///< global rank that wrote it, -1 when unknown
    PieceRole role = PieceRole::Primary;
    Shape offsets;                   ///< position of the box in the global tensor
    Shape shape;                     ///< box shape
    Shape strides;                   ///< element strides in the stored data
    DType storedDtype = DType::Unknown;
    PieceEncoding encoding = PieceEncoding::Plain;
    PieceBlocks blocks;              ///< an encoded piece's blocks
    std::uint64_t dataOffset = 0;    ///< absolute byte offset in `file` of the box's first element
    std::uint64_t storageBegin = 0;  ///< absolute byte offset of the storage record holding the data
    std::uint64_t storageBytes = 0;  ///< its length
    /// The CRC-32 a ZIP archive (torch.save, DCP items) stores for that record, checked before its bytes are used;
    /// none for formats without one (safetensors).
    std::optional<std::uint32_t> storageCrc32;
    std::string storageRecord;       ///< the record's name in its archive ("data/3"), for messages
    std::string scaleFile;           ///< MXFP4: the file holding the blocks' scale bytes
    std::uint64_t scaleOffset = 0;   ///< MXFP4: absolute byte offset there of the first block's scale
};

/// Bytes from a piece's first element to its element `elements` (in stored order); for an encoded piece a whole
/// number of its blocks, rounded up, so a span of elements ending inside a block includes that block (MXFP4: the
/// 4-bit codes only, its scales lie elsewhere).
std::uint64_t storedByteOffset(const Piece& p, std::uint64_t elements);

/// Moves `p`'s data on by `elements` stored elements: its bytes, and an MXFP4 piece's scales with them. For an
/// encoded piece a whole number of blocks, as every cut of one is (rows of whole blocks).
void skipStoredElements(Piece& p, std::uint64_t elements);

/// "float32", or its blocks' name ("Q8_0", "MXFP4") for an encoded piece: what the bytes on disk are, for reports
/// and the workbench.
std::string storedTypeName(const Piece& p);

/// One logical tensor of the checkpoint, as its owner would see it after gathering.
struct TensorInfo {
    std::string name;                 ///< the checkpoint's own key
    DType dtype = DType::Unknown;
    Shape shape;                      ///< global shape: the index space of the pieces' boxes
    std::string placement;            ///< human description, e.g. "Shard(0) on fsdp=4"; empty for plain tensors
    int meshIndex = -1;               ///< index into ParallelConfig::meshes, -1 when not a DTensor
    std::vector<Piece> pieces;
    /// The shape the tensor is saved under, when it is not `shape` but the same row-major elements with one dim
    /// whole where `shape` splits it in two: GPT-OSS's experts keep gate and up columns interleaved ([…, 2I], gate
    /// at even columns), which no dense box of [E, H, 2I] can hold, so the mapping describes them as boxes of
    /// [E, H, I, 2] and saves them as [E, H, 2I]. Empty = `shape`.
    Shape savedShape;

    std::uint64_t numel() const;
    /// The shape written to files and compared with config.json: savedShape, else shape.
    const Shape& outputShape() const { return savedShape.empty() ? shape : savedShape; }
    std::uint64_t nbytes() const { return numel() * dtypeSize(dtype); }
};

/// A device mesh as recorded in a DTensor.
struct DeviceMesh {
    Shape shape;                       ///< size per mesh dim
    std::vector<std::string> dimNames; ///< may be empty
    std::vector<std::int64_t> ranks;   ///< row-major global ranks of the mesh (product of shape entries)
    bool operator==(const DeviceMesh& other) const
    {
        return shape == other.shape && dimNames == other.dimNames && ranks == other.ranks;
    }
};

/// The parallel configuration the checkpoint was written with, as far as it says.
struct ParallelConfig {
    int worldSize = 0;                 ///< number of ranks whose files we read (0 = unknown)
    std::vector<DeviceMesh> meshes;    ///< distinct DTensor meshes
    int tensorParallel = 0;            ///< 0 = unknown / not applicable
    int pipelineParallel = 0;
    int virtualPipeline = 0;
    int expertParallel = 0;
    int dataParallel = 0;
};

/// Something wrong with the checkpoint; `file` names where (may be the folder).
struct Problem {
    std::string file;
    std::string tensor;                ///< empty when not about one tensor
    std::string message;
    std::string text() const;          ///< "file: tensor: message"
};

struct CheckpointInfo;

/// A checkpoint's optimizer state, as its reader found it beside (or instead of) the model's weights. It is never
/// part of the model a merge writes: inspect lists it, and `merge --weights_from optimizer` takes the model from
/// the master weights it keeps, when it keeps them in a form that can be read back into parameters.
struct OptimizerState {
    /// How the optimizer's keys are laid out.
    enum class Layout {
        None,
        TorchFlattened,      ///< torch's flatten_optimizer_state_dict under `optimizer.` (torchtitan's DCP)
        MegatronCanonical,   ///< `[chained_N.]optimizer.state.<kind>.<model key>`, shaped like the model key
        MegatronFlatBuffers, ///< `[chained_N.]optimizer.distributed.dp_group_idx_I.…`: the distributed optimizer's
                             ///< own per-bucket buffers
    };
    Layout layout = Layout::None;
    std::string shardingType;    ///< Megatron's param_state_sharding_type as recorded; "" when not recorded
    std::string shardingSource;  ///< where it was read ("common.pt: optimizer.param_state_sharding_type")
    std::vector<TensorInfo> tensors;              ///< every optimizer tensor, under its own key
    std::map<std::string, std::size_t> kinds;     ///< state kind ("exp_avg", "fp32_param", "step") → its tensors
    std::size_t parameters = 0;                   ///< parameters with state (0 for flat buffers)
    std::size_t otherEntries = 0;                 ///< the optimizer's non-tensor entries (hyper-parameters, …)
    std::vector<Problem> problems;                ///< damage in the optimizer's tensors (not the model's)
    /// The model read from the master weights (Megatron's canonical `fp32_param`): a checkpoint of the same layout
    /// whose tensors are those weights under their model keys, checked as the model keys are; null when there are
    /// none, and then `noMasterWeights` says why, in words for `--weights_from optimizer` (the folder not named).
    std::shared_ptr<const CheckpointInfo> masterWeights;
    std::string noMasterWeights;

    bool present() const { return layout != Layout::None || !shardingType.empty(); }
};

/// "torch-flattened", "megatron-canonical", "megatron-flat-buffers" ("" for None), for reports.
const char* optimizerLayoutName(OptimizerState::Layout layout);

/// Everything Tessera knows about a checkpoint folder after scanning its headers and pickles.
/// Shared by the merge engine, the command line and the workbench. An immutable value once built.
struct CheckpointInfo {
    std::string layout;                ///< "verl-fsdp", "dcp", "megatron-legacy", "megatron-lm", "megatron-dist", "hf-safetensors"
    std::string root;                  ///< the folder the tensors were read from
    std::string hfConfigDir;           ///< config.json/tokenizer folder, empty if none was found
    ParallelConfig parallel;
    std::vector<std::string> files;    ///< the data files read, absolute
    std::vector<TensorInfo> tensors;   ///< in the checkpoint's own key order
    std::vector<Problem> problems;
    /// What could not be checked, or what a relaxed check let through (--no-strict): shown with the problems,
    /// but no reason to refuse the checkpoint.
    std::vector<std::string> warnings;
    std::map<std::string, std::string> notes; ///< extra facts for display ("fsdp_version" → "2", …)
    /// LoRA updates to fuse into their weights (a LoRA checkpoint's fused view): the factors they name are
    /// tensors of this description that are read, never written or compared on their own.
    std::vector<LoraDelta> loraDeltas;
    /// Optimizer state kept in the same files (its tensors are not among `tensors`).
    OptimizerState optimizer;

    const TensorInfo* find(const std::string& name) const;
    /// True when `name` is a factor of one of loraDeltas.
    bool isLoraFactor(const std::string& name) const;
    /// The delta fused into the weight `name`, if any.
    const LoraDelta* loraDeltaFor(const std::string& name) const;
    /// This description without its LoRA updates and their factors: a fused view's base model.
    CheckpointInfo withoutLoraUpdates() const;
    std::uint64_t totalBytes() const;
};

} // namespace tessera
