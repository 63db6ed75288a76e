// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_file.h"
#include "formats/gguf_names.h"
#include "formats/gguf_reader.h"
#include "io/mapped_file.h"
#include "io/path_kinds.h"
#include "model/tensor_reindex.h"
#include "text_util.h"
#include "formats/layout_registry.h"

#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace tessera {

namespace {

struct StoredType {
    DType dtype;
    PieceEncoding encoding = PieceEncoding::Plain;
    PieceBlocks blocks;
};

/// How Tessera reads a ggml type, from its row in the table of types: a plain type as it is, a quantized one as
/// the float32 values it stands for (pieces of its blocks); nullopt for a type Tessera does not read.
std::optional<StoredType> storedTypeOfGgml(std::uint32_t type)
{
    const GgmlTypeInfo* row = findGgmlType(type);
    if (!row)
        return std::nullopt;
    if (!row->quantized())
        return StoredType { row->plainDtype, PieceEncoding::Plain, PieceBlocks {} };
    return StoredType { DType::Float32, PieceEncoding::GgmlBlocks,
                        PieceBlocks { row->name, type, row->blockElements, row->blockBytes } };
}

/// Rows of a llama q/k tensor from llama.cpp's interleaved order back to Hugging Face's: HF rows
/// h·d + j·d/2 + i (i = 0…d/2-1) are GGUF rows h·d + 2i + j, one box per (head, j) with a row stride of 2.
std::vector<Piece> unpermuteRows(const Piece& whole, std::int64_t rows, std::int64_t heads)
{
    const std::int64_t hd = rows / heads, half = hd / 2;
    std::vector<Piece> out;
    for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t j = 0; j < 2; ++j) {
            Piece q = whole;
            q.offsets[0] = h * hd + j * half;
            q.shape[0] = half;
            q.strides[0] = 2 * whole.strides[0];
            q.dataOffset = whole.dataOffset + storedByteOffset(whole, static_cast<std::uint64_t>((h * hd + j) * whole.strides[0]));
            out.push_back(std::move(q));
        }
    return out;
}

/// Experts past the names' six digits (gguf_names), far past any model's.
constexpr std::int64_t kMaxExperts = 999999;

/// A stacked expert tensor becomes one tensor per expert, so its expert count is checked against what the file
/// holds before any of them is made: every expert has data, and the count is the one the file declares.
Status checkExpertCount(const GgufTensorInfo& t, std::int64_t experts, std::int64_t declared)
{
    const std::string count = std::to_string(experts) + " experts";
    if (t.bytes == 0)
        return makeError(t.name + ": " + count + " that hold no data (a dimension is 0)");
    if (declared <= 0)
        return makeError(t.name + ": " + count + ", but the file declares no expert_count");
    if (experts != declared)
        return makeError(t.name + ": " + count + ", but the file's expert_count is " + std::to_string(declared));
    if (experts > kMaxExperts)
        return makeError(t.name + ": " + count + ", more than " + std::to_string(kMaxExperts) + " (damaged?)");
    return Status::success();
}

/// The notes on the file's types: how many tensors of each quantized type are read dequantized, and which tensors
/// are not read, their types being none Tessera reads.
void addTypeNotes(CheckpointInfo& info, const std::map<std::string, std::size_t>& dequantized,
                  const std::vector<std::string>& unread)
{
    if (!dequantized.empty()) {
        std::string counts;
        for (const auto& [name, n] : dequantized)
            counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + name;
        info.notes["gguf.quantized_tensors"] = counts + " tensors, read as the float32 values llama.cpp dequantizes "
                                                        "them to";
    }
    if (!unread.empty()) {
        std::string list;
        for (std::size_t i = 0; i < unread.size() && i < 8; ++i)
            list += (i ? ", " : "") + unread[i];
        if (unread.size() > 8)
            list += ", …";
        info.notes["gguf.unread_tensors"] = std::to_string(unread.size())
            + " tensors in types Tessera does not read (" + ggmlTypeList() + " it does): " + list;
    }
}

/// The file's metadata as notes: every key but the tokenizer's long lists, and a one-line tokenizer summary.
void addMetadataNotes(CheckpointInfo& info, const GgufHeader& header)
{
    for (const auto& kv : header.metadata)
        if (kv.key.rfind("tokenizer.ggml.", 0) != 0 || kv.key == "tokenizer.ggml.model" || kv.key == "tokenizer.ggml.pre"
            || kv.key.find("token_id") != std::string::npos)
            info.notes["gguf." + kv.key] = kv.value.summary(120);
    if (const GgufValue* tokens = header.find("tokenizer.ggml.tokens")) {
        const auto* list = std::get_if<std::vector<std::string>>(&tokens->data);
        const GgufValue* model = header.find("tokenizer.ggml.model");
        const GgufValue* merges = header.find("tokenizer.ggml.merges");
        const auto* mergeList = merges ? std::get_if<std::vector<std::string>>(&merges->data) : nullptr;
        info.notes["tokenizer"] = (model && model->asString() ? *model->asString() + ", " : std::string())
            + std::to_string(list ? list->size() : 0) + " tokens"
            + (mergeList ? ", " + std::to_string(mergeList->size()) + " merges" : std::string())
            + (header.find("tokenizer.chat_template") ? ", chat template" : "");
    }
    info.notes["gguf.version"] = std::to_string(header.version);
}

/// What the architecture's metadata says that changes how tensors are named and laid out.
struct GgufArch {
    std::int64_t heads = 0;
    std::int64_t kvHeads = 0;
    std::int64_t experts = 0;  ///< expert_count, 0 when absent
    bool llama = false;        ///< llama.cpp permutes the rows of llama's q and k
    bool mixtral = false;      ///< a llama with experts: Mixtral's names
};

GgufArch ggufArchOf(const GgufHeader& header)
{
    std::string arch;
    if (const GgufValue* a = header.find("general.architecture"); a && a->asString())
        arch = *a->asString();
    auto archInt = [&](const char* key) -> std::int64_t {
        const GgufValue* v = header.find(arch + key);
        return v && v->asInt() ? *v->asInt() : 0;
    };
    GgufArch facts;
    facts.heads = archInt(".attention.head_count");
    facts.kvHeads = archInt(".attention.head_count_kv") > 0 ? archInt(".attention.head_count_kv") : facts.heads;
    facts.experts = archInt(".expert_count");
    facts.llama = arch == "llama";
    facts.mixtral = facts.llama && facts.experts > 0;
    return facts;
}

/// The tensor as the file stores it, under its GGUF name: one piece over all its bytes, dims in row-major order.
TensorInfo storedTensor(const GgufTensorInfo& t, const StoredType& stored, const std::string& file,
                        std::uint64_t dataStart)
{
    TensorInfo tensor;
    tensor.name = t.name;
    tensor.dtype = stored.dtype;
    for (auto it = t.dims.rbegin(); it != t.dims.rend(); ++it)
        tensor.shape.push_back(static_cast<std::int64_t>(*it));
    Piece p;
    p.file = file;
    p.offsets.assign(tensor.shape.size(), 0);
    p.shape = tensor.shape;
    p.strides.assign(tensor.shape.size(), 1);
    for (std::size_t d = tensor.shape.size(); d-- > 1;)
        p.strides[d - 1] = p.strides[d] * tensor.shape[d];
    p.storedDtype = stored.dtype;
    p.encoding = stored.encoding;
    p.blocks = stored.blocks;
    p.dataOffset = dataStart + t.offset;
    p.storageBegin = p.dataOffset;
    p.storageBytes = t.bytes;
    tensor.pieces.push_back(std::move(p));
    return tensor;
}

/// A stacked expert tensor ([experts, …]) as one Hugging Face tensor per expert.
Status addStackedExperts(CheckpointInfo& info, const TensorInfo& tensor, const GgufTensorInfo& t,
                         const GgufArch& arch, const std::string& quantNote)
{
    if (auto counted = checkExpertCount(t, tensor.shape[0], arch.experts); !counted)
        return counted.error().withContext(info.root);
    for (std::int64_t e = 0; e < tensor.shape[0]; ++e) {
        const std::string hf = hfTensorName(t.name, static_cast<int>(e), arch.mixtral);
        TensorInfo one = selectLeading(tensor, e, hf.empty() ? t.name + "." + std::to_string(e) : hf);
        one.placement = "expert " + std::to_string(e) + " of " + t.name + quantNote;
        info.tensors.push_back(std::move(one));
    }
    return Status::success();
}

/// A tensor under its Hugging Face name and in its layout: llama's q and k rows back in rotary order, the shared
/// expert's gate as a row.
void toHuggingFaceLayout(TensorInfo& tensor, const GgufTensorInfo& t, const GgufArch& arch,
                         const std::string& quantNote)
{
    const std::string hf = hfTensorName(t.name, -1, arch.mixtral);
    if (!hf.empty())
        tensor.name = hf;
    const bool isQ = endsWith(t.name, "attn_q.weight") || endsWith(t.name, "attn_q.bias");
    const bool isK = endsWith(t.name, "attn_k.weight") || endsWith(t.name, "attn_k.bias");
    const std::int64_t h = isQ ? arch.heads : arch.kvHeads;
    // Two boxes per head: only for a tensor with data whose rows split into heads of an even size, so the
    // boxes never outnumber its rows, whatever head count the metadata claims.
    if (arch.llama && (isQ || isK) && h > 0 && t.bytes > 0 && !tensor.shape.empty() && tensor.shape[0] % h == 0
        && (tensor.shape[0] / h) % 2 == 0) {
        tensor.pieces = unpermuteRows(tensor.pieces.front(), tensor.shape[0], h);
        tensor.placement = t.name + ", rotary row order undone (" + std::to_string(h) + " heads)" + quantNote;
    }
    if (endsWith(t.name, "ffn_gate_inp_shexp.weight") && tensor.shape.size() == 1) {
        // Hugging Face holds the shared expert's gate as [1, hidden].
        tensor.shape.insert(tensor.shape.begin(), 1);
        Piece& q = tensor.pieces.front();
        q.offsets.insert(q.offsets.begin(), 0);
        q.shape.insert(q.shape.begin(), 1);
        q.strides.insert(q.strides.begin(), tensor.shape[1]);
    }
    if (tensor.placement.empty() && !quantNote.empty())
        tensor.placement = t.name + quantNote;
}

} // namespace

Result<CheckpointInfo> scanGgufFile(const std::string& path)
{
    const std::string absolute = absoluteNormal(fs::path(path)).string();
    auto file = MappedFile::open(absolute);
    TESSERA_TRY(file);
    auto header = parseGgufHeader((*file)->view());
    if (!header)
        return header.error().withContext(absolute);
    CheckpointInfo info;
    info.layout = layout_names::kGguf;
    info.root = absolute;
    info.files = { absolute };
    std::error_code ec;
    const fs::path folder = fs::path(absolute).parent_path();
    if (fs::exists(folder / "config.json", ec))
        info.hfConfigDir = folder.string();
    addMetadataNotes(info, *header);
    const GgufArch arch = ggufArchOf(*header);
    std::vector<std::string> unread;
    std::map<std::string, std::size_t> dequantized; // type name → tensors
    for (const auto& t : header->tensors) {
        const auto stored = storedTypeOfGgml(t.type);
        // Quantized rows are whole blocks (llama.cpp's rule, checked again here: the boxes below cut whole rows only).
        if (!stored
            || (stored->encoding != PieceEncoding::Plain && (t.dims.empty() || t.dims[0] % stored->blocks.elements))) {
            unread.push_back(t.name + " (" + ggmlTypeName(t.type) + ")");
            continue;
        }
        if (stored->encoding != PieceEncoding::Plain)
            ++dequantized[stored->blocks.name];
        const std::string quantNote
            = stored->encoding != PieceEncoding::Plain ? ", " + std::string(stored->blocks.name) + " dequantized" : "";
        TensorInfo tensor = storedTensor(t, *stored, absolute, header->dataStart);
        if (endsWith(t.name, "_exps.weight") && tensor.shape.size() == 3) {
            TESSERA_TRY(addStackedExperts(info, tensor, t, arch, quantNote));
            continue;
        }
        toHuggingFaceLayout(tensor, t, arch, quantNote);
        info.tensors.push_back(std::move(tensor));
    }
    addTypeNotes(info, dequantized, unread);
    return info;
}

} // namespace tessera
