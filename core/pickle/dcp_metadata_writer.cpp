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

void metadataIndex(Pickler& p, const std::string& fqn, const Shape& offsets, std::size_t index)
{
    newObject(p, kMetadataModule, "MetadataIndex");
    p.op('}');
    p.op('(');
    p.str("fqn");
    p.str(fqn);
    p.str("offset");
    p.size(offsets);
    p.str("index");
    p.integer(static_cast<std::int64_t>(index));
    p.op('u');
    p.op('b');
}

} // namespace

std::string dcpMetadataPickle(const std::vector<DcpTensorRecord>& tensors, const std::string& saveId)
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
    p.op('u');

    p.str("planner_data");
    p.op('}');
    p.op('(');
    for (const auto& t : tensors) {
        p.str(t.fqn);
        p.str(t.fqn);
        p.op('\x85');
    }
    p.op('u');

    p.str("storage_data");
    p.op('}');
    p.op('(');
    for (const auto& t : tensors)
        for (std::size_t i = 0; i < t.chunks.size(); ++i) {
            const auto& c = t.chunks[i];
            metadataIndex(p, t.fqn, c.offsets, i);
            newObject(p, "torch.distributed.checkpoint.filesystem", "_StorageInfo");
            p.op('}');
            p.op('(');
            p.str("relative_path");
            p.str(c.file);
            p.str("offset");
            p.integer(static_cast<std::int64_t>(c.offset));
            p.str("length");
            p.integer(static_cast<std::int64_t>(c.length));
            p.op('u');
            p.op('b');
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
