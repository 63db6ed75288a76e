// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/dcp_metadata_writer.h"

#include "pickle/pickle_writer.h"

namespace tessera {

namespace {

const char* const kMetadataModule = "torch.distributed.checkpoint.metadata";

/// `cls()` (NEWOBJ with no arguments), its state set by the BUILD the caller ends it with.
void newObject(Pickler& p, const char* module, const char* name)
{
    p.global(module, name);
    p.op(')');
    p.op('\x81');
}

/// TensorProperties keeps its state as a tuple: (dtype, layout, requires_grad, memory_format, pin_memory).
void tensorProperties(Pickler& p, DType dtype)
{
    newObject(p, kMetadataModule, "TensorProperties");
    p.op('(');
    p.dtype(dtype);
    p.global("torch.serialization", "_get_layout");
    p.str("torch.strided");
    p.op('\x85');
    p.op('R');
    p.op('\x89');
    p.global(kMetadataModule, "_MEM_FORMAT_ENCODING");
    p.integer(0); // TORCH_CONTIGUOUS_FORMAT
    p.op('\x85');
    p.op('R');
    p.op('\x89');
    p.op('t');
    p.op('b');
}

/// MetadataIndex(fqn, offset, index) of a tensor's chunk, or MetadataIndex(fqn) of a non-tensor entry (`offsets`
/// null: neither offset nor index).
void metadataIndex(Pickler& p, const std::string& fqn, const Shape* offsets, std::size_t index)
{
    newObject(p, kMetadataModule, "MetadataIndex");
    p.op('}');
    p.op('(');
    p.str("fqn");
    p.str(fqn);
    p.str("offset");
    if (offsets)
        p.size(*offsets);
    else
        p.op('N');
    p.str("index");
    if (offsets)
        p.integer(static_cast<std::int64_t>(index));
    else
        p.op('N');
    p.op('u');
    p.op('b');
}

/// A planner path: the source's tuple of keys (str, or int for list positions), else (fqn,).
void plannerPath(Pickler& p, const std::string& fqn, const PyRef& path)
{
    if (!path || path->kind != PyValue::Kind::Tuple || path->items.empty()) {
        p.str(fqn);
        p.op('\x85');
        return;
    }
    p.op('(');
    for (const auto& key : path->items) {
        if (key && key->isInt())
            p.integer(key->integer);
        else
            p.str(key && key->isStr() ? key->text : fqn);
    }
    p.op('t');
}

void storageInfo(Pickler& p, const std::string& file, std::uint64_t offset, std::uint64_t length)
{
    newObject(p, "torch.distributed.checkpoint.filesystem", "_StorageInfo");
    p.op('}');
    p.op('(');
    p.str("relative_path");
    p.str(file);
    p.str("offset");
    p.integer(static_cast<std::int64_t>(offset));
    p.str("length");
    p.integer(static_cast<std::int64_t>(length));
    p.op('u');
    p.op('b');
}

} // namespace

std::string dcpMetadataPickle(const std::vector<DcpTensorRecord>& tensors, const std::string& saveId,
                              const std::vector<DcpBytesRecord>& bytes)
{
    Pickler p;
    p.op('\x80');
    p.op('\x02');
    newObject(p, kMetadataModule, "Metadata");
    p.op('}');
    p.op('(');

    p.str("state_dict_metadata");
    p.op('}');
    p.op('(');
    for (const auto& t : tensors) {
        p.str(t.fqn);
        newObject(p, kMetadataModule, "TensorStorageMetadata");
        p.op('}');
        p.op('(');
        p.str("properties");
        tensorProperties(p, t.dtype);
        p.str("size");
        p.size(t.size);
        p.str("chunks");
        p.op(']');
        p.op('(');
        for (const auto& c : t.chunks) {
            newObject(p, kMetadataModule, "ChunkStorageMetadata");
            p.op('}');
            p.op('(');
            p.str("offsets");
            p.size(c.offsets);
            p.str("sizes");
            p.size(c.sizes);
            p.op('u');
            p.op('b');
        }
        p.op('e');
        p.op('u');
        p.op('b');
    }
    for (const auto& b : bytes) {
        p.str(b.fqn);
        newObject(p, kMetadataModule, "BytesStorageMetadata");
        p.op('}');
        p.op('b');
    }
    p.op('u');

    p.str("planner_data");
    p.op('}');
    p.op('(');
    for (const auto& t : tensors) {
        p.str(t.fqn);
        plannerPath(p, t.fqn, t.plannerPath);
    }
    for (const auto& b : bytes) {
        p.str(b.fqn);
        plannerPath(p, b.fqn, b.plannerPath);
    }
    p.op('u');

    p.str("storage_data");
    p.op('}');
    p.op('(');
    for (const auto& t : tensors)
        for (std::size_t i = 0; i < t.chunks.size(); ++i) {
            const auto& c = t.chunks[i];
            metadataIndex(p, t.fqn, &c.offsets, i);
            storageInfo(p, c.file, c.offset, c.length);
        }
    for (const auto& b : bytes) {
        metadataIndex(p, b.fqn, nullptr, 0);
        storageInfo(p, b.file, b.offset, b.length);
    }
    p.op('u');

    p.str("storage_meta");
    newObject(p, kMetadataModule, "StorageMeta");
    p.op('}');
    p.op('(');
    p.str("checkpoint_id");
    p.op('N');
    p.str("save_id");
    p.str(saveId);
    p.str("load_id");
    p.op('N');
    p.op('u');
    p.op('b');

    p.op('u');
    p.op('b');
    p.op('.');
    return p.out;
}

} // namespace tessera
