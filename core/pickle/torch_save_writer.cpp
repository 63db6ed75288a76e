// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/torch_save_writer.h"
#include "io/printable.h"

#include "pickle/pickle_writer.h"
#include "pickle/torch_zip_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <fcntl.h>
#include <unistd.h>

namespace tessera {

namespace {

constexpr std::uint64_t kChunk = 16u << 20;

std::uint64_t numelOf(const Shape& shape)
{
    std::uint64_t n = 1;
    for (auto s : shape)
        n *= static_cast<std::uint64_t>(s);
    return n;
}

void placement(Pickler& p, const Placement& pl)
{
    const std::string module = "torch.distributed.tensor.placement_types";
    switch (pl.kind) {
    case Placement::Kind::Shard:
    case Placement::Kind::StridedShard:
        p.global(module, pl.kind == Placement::Kind::Shard ? "Shard" : "_StridedShard");
        p.op(')');
        p.op('\x81');
        p.op('}');
        p.op('(');
        p.str("dim");
        p.integer(pl.dim);
        if (pl.kind == Placement::Kind::StridedShard) {
            p.str("split_factor");
            p.integer(pl.splitFactor);
        }
        p.op('u');
        p.op('b');
        break;
    case Placement::Kind::Replicate:
        p.global(module, "Replicate");
        p.op(')');
        p.op('\x81');
        break;
    case Placement::Kind::Partial:
        p.global(module, "Partial");
        p.op(')');
        p.op('\x81');
        p.op('}');
        p.str("reduce_op");
        p.str(pl.reduceOp);
        p.op('s');
        p.op('b');
        break;
    }
}

/// A stable stand-in for the `_hash` fields torch caches in DeviceMesh and DTensorSpec (Python's own hashes are
/// salted per process, so no file could reproduce them; torch only uses them as a cache key).
std::int64_t stableHash(const std::string& text)
{
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : text)
        h = (h ^ c) * 1099511628211ull;
    return static_cast<std::int64_t>(h);
}

std::string meshText(const DeviceMesh& mesh)
{
    std::string s = shapeToString(mesh.shape);
    for (const auto& n : mesh.dimNames)
        s += "," + n;
    for (auto r : mesh.ranks)
        s += ";" + std::to_string(r);
    return s;
}

/// DeviceMesh's `_dim_group_infos` entry for mesh dim `dim` at `coordinate`: (tag, ranks, group name) of the
/// process group torch 2.6 creates for that slice. A 1-D mesh uses the default group ("0"); otherwise groups are
/// numbered from 1 in creation order: dim by dim, the slices of `mesh.swapdims(-1, dim)` in row-major order.
void dimGroupInfo(Pickler& p, const DeviceMesh& mesh, std::size_t dim, const Shape& coordinate)
{
    const std::size_t nd = mesh.shape.size();
    std::vector<std::int64_t> ranks;
    Shape at = coordinate;
    for (std::int64_t i = 0; i < mesh.shape[dim]; ++i) {
        at[dim] = i;
        std::uint64_t flat = 0;
        for (std::size_t d = 0; d < nd; ++d)
            flat = flat * static_cast<std::uint64_t>(mesh.shape[d]) + static_cast<std::uint64_t>(at[d]);
        ranks.push_back(flat < mesh.ranks.size() ? mesh.ranks[flat] : 0);
    }
    std::int64_t name = 0;
    if (nd > 1) {
        const std::uint64_t total = numelOf(mesh.shape);
        name = 1;
        for (std::size_t d = 0; d < dim; ++d)
            name += static_cast<std::int64_t>(total / static_cast<std::uint64_t>(mesh.shape[d]));
        Shape swapped = mesh.shape, coord = coordinate;
        std::swap(swapped[dim], swapped[nd - 1]);
        std::swap(coord[dim], coord[nd - 1]);
        std::int64_t slice = 0;
        for (std::size_t d = 0; d + 1 < nd; ++d)
            slice = slice * swapped[d] + coord[d];
        name += slice;
    }
    p.str("ptd:" + std::to_string(name));
    p.intList(ranks);
    p.str(std::to_string(name));
    p.op('\x87');
}

} // namespace

std::uint64_t TorchSaveTensor::storageBytes() const
{
    return std::max<std::uint64_t>(storageElements, numelOf(shape)) * dtypeSize(dtype);
}

struct TorchSaveWriter::State {
    std::FILE* file = nullptr;
    std::string path;
    std::unique_ptr<ZipWriter> zip;
    /// What is left to write of each tensor once the pickle is made: its name and its storage's size (a DTensor's
    /// mesh is not kept: on thousands of ranks, every tensor's copy of it would add up).
    struct Storage {
        std::string name;
        std::uint64_t bytes = 0;
    };
    std::vector<Storage> tensors;
    std::vector<std::string> keys;                ///< storage key of each tensor
    std::vector<bool> written;
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> meshStorages; ///< key, int32 ranks
    std::size_t current = static_cast<std::size_t>(-1);
    std::uint64_t currentExpected = 0;
    bool failed = false;

    Error ioError()
    {
        failed = true;
        return Error { path + ": write failed (disk full?)" };
    }
    bool record(const std::string& name, const std::string& bytes)
    {
        return zip->begin(name, bytes.size()) && zip->data(bytes.data(), bytes.size()) && zip->end();
    }
};

namespace {

/// The pickle of a saved value, written as torch.save writes it: storage keys assigned in the order torch does
/// (first use while pickling), each DeviceMesh pickled once and memoized. One object per pickle.
class PayloadPickler {
public:
    PayloadPickler(TorchSaveWriter::Value value, const std::vector<std::size_t>& listChunks,
                   const std::vector<std::string>& chunkKeys, std::vector<std::string>& keys,
                   std::vector<std::pair<std::string, std::vector<std::int64_t>>>& meshStorages,
                   const PyValue* tree)
        : m_named(value == TorchSaveWriter::Value::StateDictsInDict)
        , m_list(value == TorchSaveWriter::Value::StateDictList || m_named)
        , m_bare(value == TorchSaveWriter::Value::BareTensor)
        , m_listChunks(listChunks)
        , m_chunkKeys(chunkKeys)
        , m_keys(keys)
        , m_meshStorages(meshStorages)
        , m_tree(tree)
    {
    }

    std::string pickle(const std::vector<TorchSaveTensor>& tensors, const std::string& rootItems)
    {
        m_pickler.op('\x80');
        m_pickler.op('\x02');
        if (m_bare) {
            localTensor(tensors.front());
            m_pickler.op('.');
            return m_pickler.out;
        }
        if (m_tree) {
            treeValue(*m_tree, tensors);
            m_pickler.op('.');
            return m_pickler.out;
        }
        openContainer(rootItems);
        for (std::size_t ti = 0; ti < tensors.size(); ++ti) {
            const auto& t = tensors[ti];
            startDictsAt(ti);
            m_pickler.str(t.name);
            if (t.dtensor)
                dtensor(t);
            else
                localTensor(t);
        }
        closeContainer();
        m_pickler.op('.');
        return m_pickler.out;
    }

private:
    /// A value of a tree (checked by treeRefusal()): its containers and scalars as Python pickles them, its tensor
    /// placeholders as the tensors they stand for.
    void treeValue(const PyValue& v, const std::vector<TorchSaveTensor>& tensors)
    {
        switch (v.kind) {
        case PyValue::Kind::None:
            return m_pickler.op('N');
        case PyValue::Kind::Bool:
            return m_pickler.op(v.boolean ? '\x88' : '\x89');
        case PyValue::Kind::Int:
            return v.bigInt ? m_pickler.long1(v.text) : m_pickler.integer(v.integer);
        case PyValue::Kind::Float:
            return m_pickler.real(v.real);
        case PyValue::Kind::Str:
            return m_pickler.str(v.text);
        case PyValue::Kind::Tuple:
            m_pickler.op('(');
            for (const auto& item : v.items)
                treeValue(*item, tensors);
            return m_pickler.op('t');
        case PyValue::Kind::List:
            m_pickler.op(']');
            m_pickler.op('(');
            for (const auto& item : v.items)
                treeValue(*item, tensors);
            return m_pickler.op('e');
        case PyValue::Kind::Dict:
            m_pickler.op('}');
            m_pickler.op('(');
            for (const auto& [key, value] : v.entries) {
                treeValue(*key, tensors);
                treeValue(*value, tensors);
            }
            return m_pickler.op('u');
        default: { // a tensor placeholder
            const TorchSaveTensor& t = tensors[static_cast<std::size_t>(v.integer)];
            return t.dtensor ? dtensor(t) : localTensor(t);
        }
        }
    }

    /// Several plain dicts, in a list (as verl saves Megatron's model chunks) or under keys of a dict (Megatron-LM),
    /// or one OrderedDict (module.state_dict()): opened, with the first dict's items begun.
    void openContainer(const std::string& rootItems)
    {
        if (m_list) {
            std::size_t end = 0;
            for (auto n : m_listChunks)
                m_dictEnds.push_back(end += n);
            if (m_named) {
                m_pickler.op('}');
                m_pickler.op('(');
                m_pickler.out += rootItems;
            } else {
                m_pickler.op(']');
                m_pickler.op('(');
            }
            openDict();
        } else {
            m_pickler.global("collections", "OrderedDict");
            m_pickler.op(')');
            m_pickler.op('R');
        }
        m_pickler.op('(');
    }

    /// One dict of a list or of the named dicts: its key when named, then the empty dict.
    void openDict()
    {
        if (m_named)
            m_pickler.str(m_chunkKeys[m_nextDict]);
        ++m_nextDict;
        m_pickler.op('}');
    }

    /// Before tensor `ti`: the dicts that end there are completed (possibly empty) and the next ones started.
    void startDictsAt(std::size_t ti)
    {
        while (m_list && !m_dictEnds.empty() && m_dictEnds.front() == ti) {
            // The previous dict is complete (possibly empty): the next one starts.
            m_pickler.op('u');
            openDict();
            m_pickler.op('(');
            m_dictEnds.erase(m_dictEnds.begin());
        }
    }

    /// The last dict's items set, the trailing empty dicts, and the container closed.
    void closeContainer()
    {
        m_pickler.op('u');
        if (m_list) {
            for (std::size_t i = 1; i < m_dictEnds.size(); ++i) {
                openDict(); // trailing empty dicts
                m_pickler.op('(');
                m_pickler.op('u');
            }
            m_pickler.op(m_named ? 'u' : 'e');
        }
    }

    void localTensor(const TorchSaveTensor& t)
    {
        const std::string key = std::to_string(m_nextKey++);
        m_keys.push_back(key);
        m_pickler.tensor(t.dtype, t.shape, key, std::max<std::uint64_t>(t.storageElements, numelOf(t.shape)));
    }

    /// A DTensor: _rebuild_from_type_v2 of the wrapper subclass's shell, with state (None, {slots}).
    void dtensor(const TorchSaveTensor& t)
    {
        const Shape globalStride = contiguousStrides(t.globalShape);
        m_pickler.global("torch._tensor", "_rebuild_from_type_v2");
        m_pickler.op('(');
        m_pickler.global("torch._utils", "_rebuild_wrapper_subclass");
        m_pickler.global("torch.distributed.tensor", "DTensor");
        m_pickler.op('(');
        m_pickler.global("torch.distributed.tensor", "DTensor");
        m_pickler.dtype(t.dtype);
        m_pickler.intTuple(t.globalShape);
        m_pickler.intTuple(globalStride);
        m_pickler.integer(0);
        m_pickler.global("torch.serialization", "_get_layout");
        m_pickler.str("torch.strided");
        m_pickler.op('\x85');
        m_pickler.op('R');
        m_pickler.global("torch", "device");
        m_pickler.str("cpu");
        m_pickler.op('\x85');
        m_pickler.op('R');
        m_pickler.op('\x89');
        m_pickler.op('t');
        // state = (None, {slots}): DTensor keeps _local_tensor and _spec in __slots__.
        m_pickler.op('N');
        m_pickler.op('}');
        m_pickler.op('(');
        m_pickler.str("_local_tensor");
        localTensor(t);
        m_pickler.str("_spec");
        dtensorSpec(t, globalStride);
        m_pickler.op('u');
        m_pickler.op('\x86');
        m_pickler.op('t');
        m_pickler.op('R');
    }

    /// The DTensorSpec: mesh, placements, tensor_meta and its cached hash.
    void dtensorSpec(const TorchSaveTensor& t, const Shape& globalStride)
    {
        m_pickler.global("torch.distributed.tensor._dtensor_spec", "DTensorSpec");
        m_pickler.op(')');
        m_pickler.op('\x81');
        m_pickler.op('}');
        m_pickler.op('(');
        m_pickler.str("mesh");
        const std::string mesh = meshText(t.mesh);
        deviceMesh(t, mesh);
        m_pickler.str("placements");
        m_pickler.op('(');
        std::string placementText;
        for (const auto& pl : t.placements) {
            placement(m_pickler, pl);
            placementText += pl.text();
        }
        m_pickler.op('t');
        m_pickler.str("tensor_meta");
        m_pickler.global("torch.distributed.tensor._dtensor_spec", "TensorMeta");
        m_pickler.global("torch", "Size");
        m_pickler.intTuple(t.globalShape);
        m_pickler.op('\x85');
        m_pickler.op('R');
        m_pickler.intTuple(globalStride);
        m_pickler.dtype(t.dtype);
        m_pickler.op('\x87');
        m_pickler.op('\x81');
        m_pickler.str("_hash");
        m_pickler.long8(stableHash(mesh + placementText + shapeToString(t.globalShape) + std::string(torchName(t.dtype))));
        m_pickler.op('u');
        m_pickler.op('b');
    }

    /// The tensor's DeviceMesh (`mesh` is its text): a memo reference when an earlier tensor had the same mesh,
    /// else the object (its ranks a storage of their own), memoized.
    void deviceMesh(const TorchSaveTensor& t, const std::string& mesh)
    {
        if (auto it = m_meshSlots.find(mesh); it != m_meshSlots.end()) {
            m_pickler.get(it->second);
            return;
        }
        m_pickler.global("torch.distributed.device_mesh", "DeviceMesh");
        m_pickler.op(')');
        m_pickler.op('\x81');
        m_pickler.op('}');
        m_pickler.op('(');
        m_pickler.str("device_type");
        m_pickler.str("cpu");
        m_pickler.str("mesh");
        const std::string meshKey = std::to_string(m_nextKey++);
        m_meshStorages.emplace_back(meshKey, t.mesh.ranks);
        m_pickler.tensor(DType::Int32, t.mesh.shape, meshKey, t.mesh.ranks.size());
        m_pickler.str("mesh_dim_names");
        if (t.mesh.dimNames.empty()) {
            m_pickler.op('N');
        } else {
            m_pickler.op('(');
            for (const auto& n : t.mesh.dimNames)
                m_pickler.str(n);
            m_pickler.op('t');
        }
        m_pickler.str("_flatten_mesh_list");
        m_pickler.intTuple(t.mesh.ranks);
        m_pickler.str("_thread_id");
        m_pickler.op('N');
        m_pickler.str("_dim_group_infos");
        m_pickler.op(']');
        m_pickler.op('(');
        for (std::size_t d = 0; d < t.mesh.shape.size(); ++d)
            dimGroupInfo(m_pickler, t.mesh, d, t.coordinate);
        m_pickler.op('e');
        m_pickler.str("_coordinate_on_dim");
        m_pickler.intList(t.coordinate);
        m_pickler.str("_hash");
        m_pickler.long8(stableHash(mesh));
        m_pickler.op('u');
        m_pickler.op('b');
        m_pickler.put(m_nextSlot);
        m_meshSlots.emplace(mesh, m_nextSlot++);
    }

    Pickler m_pickler;
    const bool m_named;  ///< StateDictsInDict: the dicts under keys of a dict
    const bool m_list;   ///< StateDictList or StateDictsInDict
    const bool m_bare;   ///< BareTensor
    const std::vector<std::size_t>& m_listChunks;
    const std::vector<std::string>& m_chunkKeys;
    std::vector<std::string>& m_keys;
    std::vector<std::pair<std::string, std::vector<std::int64_t>>>& m_meshStorages;
    const PyValue* m_tree; ///< Tree: the value written
    std::vector<std::size_t> m_dictEnds; ///< the index of the tensor each dict ends before, the current one's first
    std::size_t m_nextDict = 0;
    std::size_t m_nextKey = 0;
    std::map<std::string, std::uint32_t> m_meshSlots; ///< mesh text → memo slot of its DeviceMesh
    std::uint32_t m_nextSlot = 0;
};

/// The pickle of the saved value, assigning storage keys in the order torch does (first use while pickling).
std::string picklePayload(const std::vector<TorchSaveTensor>& tensors, TorchSaveWriter::Value value,
                          const std::vector<std::size_t>& listChunks, const std::vector<std::string>& chunkKeys,
                          const std::string& rootItems, std::vector<std::string>& keys,
                          std::vector<std::pair<std::string, std::vector<std::int64_t>>>& meshStorages,
                          const PyValue* tree)
{
    return PayloadPickler(value, listChunks, chunkKeys, keys, meshStorages, tree).pickle(tensors, rootItems);
}

/// Why `tree` cannot be written as a Tree value of `tensors`: a kind the writer does not pickle, or placeholders
/// that are not 0, 1, 2, … in the order they are met (storage keys follow that order). "" when it can.
std::string treeRefusal(const PyValue& tree, std::size_t tensors)
{
    std::int64_t next = 0;
    std::vector<const PyValue*> stack { &tree };
    std::string refusal;
    while (!stack.empty() && refusal.empty()) {
        const PyValue& v = *stack.back();
        stack.pop_back();
        switch (v.kind) {
        case PyValue::Kind::None: case PyValue::Kind::Bool: case PyValue::Kind::Float: case PyValue::Kind::Str:
            break;
        case PyValue::Kind::Int:
            if (v.bigInt && v.text.size() > 255)
                refusal = "it holds an integer of " + std::to_string(v.text.size()) + " bytes";
            break;
        case PyValue::Kind::Tuple: case PyValue::Kind::List:
            for (auto it = v.items.rbegin(); it != v.items.rend(); ++it)
                stack.push_back(it->get());
            break;
        case PyValue::Kind::Dict:
            for (auto it = v.entries.rbegin(); it != v.entries.rend(); ++it) {
                stack.push_back(it->second.get());
                stack.push_back(it->first.get());
            }
            break;
        case PyValue::Kind::Tensor:
            if (v.tensor || v.integer != next++ || static_cast<std::size_t>(v.integer) >= tensors)
                refusal = "its tensors are not given in the order the value holds them";
            break;
        default:
            refusal = "it holds " + v.repr(1) + ", which Tessera does not write";
        }
    }
    if (refusal.empty() && static_cast<std::size_t>(next) != tensors)
        refusal = "it holds " + std::to_string(next) + " tensors, not " + std::to_string(tensors);
    return refusal;
}

/// torch 2.6 records a random 40-digit serialization id; a stable one derived from the content (the records and
/// their CRC-32, never the folder the file is written in) serves the same purpose (telling archives apart) and keeps
/// outputs reproducible: the same split gives the same bytes in any folder, in one process or in parts.
std::string serializationId(const std::string& pickle)
{
    std::string id;
    std::uint64_t h = static_cast<std::uint64_t>(stableHash(pickle));
    while (id.size() < 40) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        id += std::to_string((h >> 33) % 10);
    }
    return id;
}

} // namespace

Result<std::unique_ptr<TorchSaveWriter>> TorchSaveWriter::begin(std::FILE* file, const std::string& path,
                                                                 const std::string& archiveName,
                                                                 const std::vector<TorchSaveTensor>& tensors,
                                                                 Value value, const std::vector<std::size_t>& listChunks,
                                                                 const std::vector<std::string>& chunkKeys,
                                                                 const std::string& rootItems, const PyValue* tree)
{
    if (value == Value::BareTensor && tensors.size() != 1)
        return makeError(path + ": a bare tensor archive holds exactly one tensor");
    if ((value == Value::Tree) != (tree != nullptr))
        return makeError(path + ": a tree value needs its tree");
    if (tree)
        if (const std::string refusal = treeRefusal(*tree, tensors.size()); !refusal.empty())
            return makeError(path + ": the value cannot be written: " + refusal);
    for (const auto& t : tensors)
        if (!torchStorageClass(t.dtype))
            return makeError(path + ": " + printableText(t.name) + ": dtype " + std::string(torchName(t.dtype))
                             + " cannot be written");
    std::unique_ptr<TorchSaveWriter> w(new TorchSaveWriter);
    w->m = std::make_unique<State>();
    State& s = *w->m;
    s.file = file;
    s.path = path;
    for (const auto& t : tensors)
        s.tensors.push_back({ t.name, t.storageBytes() });
    s.written.assign(tensors.size(), false);
    if (value == Value::StateDictList || value == Value::StateDictsInDict) {
        std::size_t total = 0;
        for (auto n : listChunks)
            total += n;
        if (listChunks.empty() || total != tensors.size())
            return makeError(path + ": the state dicts of the list do not add up to the tensors written");
        if (value == Value::StateDictsInDict && chunkKeys.size() != listChunks.size())
            return makeError(path + ": every state dict needs its key");
    }
    const std::string pickle
        = picklePayload(tensors, value, listChunks, chunkKeys, rootItems, s.keys, s.meshStorages, tree);
    s.zip = std::make_unique<ZipWriter>(file, archiveName);
    if (!s.record("data.pkl", pickle) || !s.record("byteorder", "little"))
        return s.ioError();
    return w;
}

TorchSaveWriter::~TorchSaveWriter() = default;

Status TorchSaveWriter::beginStorage(std::size_t index)
{
    State& s = *m;
    if (index >= s.tensors.size() || s.written[index] || s.current != static_cast<std::size_t>(-1))
        return makeError(s.path + ": storage " + std::to_string(index) + " written out of turn");
    s.current = index;
    s.currentExpected = s.tensors[index].bytes;
    if (!s.zip->begin("data/" + s.keys[index], s.currentExpected))
        return s.ioError();
    return Status::success();
}

Status TorchSaveWriter::append(const void* bytes, std::uint64_t n)
{
    State& s = *m;
    if (s.current == static_cast<std::size_t>(-1) || s.zip->recordBytes() + n > s.currentExpected)
        return makeError(s.path + ": more bytes than the storage holds");
    if (n && !s.zip->data(bytes, n))
        return s.ioError();
    return Status::success();
}

Status TorchSaveWriter::appendZeros(std::uint64_t n)
{
    static const std::vector<std::uint8_t> zeros(1u << 20, 0);
    while (n) {
        const std::uint64_t k = std::min<std::uint64_t>(n, zeros.size());
        TESSERA_TRY(append(zeros.data(), k));
        n -= k;
    }
    return Status::success();
}

Status TorchSaveWriter::endStorage()
{
    State& s = *m;
    if (s.current == static_cast<std::size_t>(-1) || s.zip->recordBytes() != s.currentExpected)
        return makeError(s.path + ": storage of " + (s.current < s.tensors.size() ? s.tensors[s.current].name : "?")
                         + " ended before all its bytes were written");
    if (!s.zip->end())
        return s.ioError();
    s.written[s.current] = true;
    s.current = static_cast<std::size_t>(-1);
    return Status::success();
}

Result<std::uint64_t> TorchSaveWriter::finish()
{
    State& s = *m;
    for (std::size_t i = 0; i < s.tensors.size(); ++i)
        if (!s.written[i])
            return makeError(s.path + ": " + printableText(s.tensors[i].name) + ": storage never written");
    for (const auto& [key, ranks] : s.meshStorages) {
        std::string bytes;
        for (auto r : ranks) {
            const auto v = static_cast<std::uint32_t>(static_cast<std::int32_t>(r));
            for (int b = 0; b < 4; ++b)
                bytes += static_cast<char>((v >> (8 * b)) & 0xFF);
        }
        if (!s.record("data/" + key, bytes))
            return s.ioError();
    }
    if (!s.record("version", "3\n") || !s.record(".data/serialization_id", serializationId(s.zip->contentKey()))
        || !s.zip->finish())
        return s.ioError();
    return s.zip->cursor();
}

Status writeTorchSavePickle(const std::string& path, const std::string& archiveName, const std::string& pickle)
{
    // Never through a link: the folder is the run's own, and a link there was not put there by it.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(fd < 0 ? nullptr : ::fdopen(fd, "wb"), &std::fclose);
    if (!file) {
        if (fd >= 0)
            ::close(fd);
        return makeError(path + ": cannot be created");
    }
    ZipWriter zip(file.get(), archiveName);
    auto record = [&](const std::string& name, const std::string& bytes) {
        return zip.begin(name, bytes.size()) && zip.data(bytes.data(), bytes.size()) && zip.end();
    };
    if (!record("data.pkl", pickle) || !record("byteorder", "little") || !record("version", "3\n")
        || !record(".data/serialization_id", serializationId(zip.contentKey())) || !zip.finish()
        || std::fflush(file.get()) != 0 || ::fdatasync(::fileno(file.get())) != 0)
        return makeError(path + ": write failed (disk full?)");
    return Status::success();
}

Status writeRenamedTorchSave(const TorchSaveFile& source, const std::string& path, const std::string& archiveName)
{
    const ZipArchive& zip = source.archive();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(fd < 0 ? nullptr : ::fdopen(fd, "wb"), &std::fclose);
    if (!file) {
        if (fd >= 0)
            ::close(fd);
        return makeError(path + ": cannot be created: " + std::strerror(errno));
    }
    ZipWriter out(file.get(), archiveName);
    const std::string prefix = zip.prefix() + "/";
    for (const auto& entry : zip.entries()) {
        if (entry.name.compare(0, prefix.size(), prefix) != 0)
            return makeError(source.displayName() + ": the record " + printableText(entry.name)
                             + " lies outside the archive's folder " + printableText(zip.prefix()));
        auto bytes = zip.read(entry); // checked against its CRC-32
        TESSERA_TRY(bytes);
        if (!out.begin(entry.name.substr(prefix.size()), bytes->size()) || !out.data(bytes->data(), bytes->size())
            || !out.end())
            return makeError(path + ": write failed (disk full?)");
    }
    if (!out.finish() || std::fflush(file.get()) != 0 || ::fdatasync(::fileno(file.get())) != 0)
        return makeError(path + ": write failed (disk full?)");
    return Status::success();
}

Status writeTorchSave(const std::string& path, const std::vector<TorchSaveTensor>& tensors, const TorchSaveFill& fill)
{
    const std::string temp = path + ".tmp";
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(temp.c_str(), "wb"), &std::fclose);
    if (!file)
        return makeError(path + ": cannot be created");
    auto fail = [&](const Error& e) {
        file.reset();
        std::remove(temp.c_str());
        return Status(e);
    };
    auto writer = TorchSaveWriter::begin(file.get(), path, std::filesystem::path(path).stem().string(), tensors);
    if (!writer)
        return fail(writer.error());
    std::vector<std::uint8_t> buffer;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (auto s = (*writer)->beginStorage(i); !s)
            return fail(s.error());
        const std::uint64_t data = numelOf(tensors[i].shape) * dtypeSize(tensors[i].dtype);
        for (std::uint64_t off = 0; off < data; off += kChunk) {
            const std::uint64_t n = std::min(kChunk, data - off);
            buffer.resize(n);
            if (auto status = fill(i, off, buffer.data(), n); !status)
                return fail(status.error().withContext(path + ": " + tensors[i].name));
            if (auto s = (*writer)->append(buffer.data(), n); !s)
                return fail(s.error());
        }
        if (auto s = (*writer)->appendZeros(tensors[i].storageBytes() - data); !s)
            return fail(s.error());
        if (auto s = (*writer)->endStorage(); !s)
            return fail(s.error());
    }
    auto finished = (*writer)->finish();
    if (!finished)
        return fail(finished.error());
    if (std::fflush(file.get()) != 0)
        return fail(Error { path + ": write failed (disk full?)" });
    file.reset();
    std::error_code ec;
    std::filesystem::rename(temp, path, ec);
    if (ec)
        return makeError(path + ": cannot be renamed into place: " + ec.message());
    return Status::success();
}

} // namespace tessera
