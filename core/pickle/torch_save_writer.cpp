// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/torch_save_writer.h"

#include "io/crc32.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace tessera {

namespace {

constexpr std::uint64_t kChunk = 16u << 20;

const char* storageClass(DType dtype)
{
    switch (dtype) {
    case DType::Bool: return "BoolStorage";
    case DType::UInt8: return "ByteStorage";
    case DType::Int8: return "CharStorage";
    case DType::Int16: return "ShortStorage";
    case DType::Int32: return "IntStorage";
    case DType::Int64: return "LongStorage";
    case DType::Float16: return "HalfStorage";
    case DType::BFloat16: return "BFloat16Storage";
    case DType::Float32: return "FloatStorage";
    case DType::Float64: return "DoubleStorage";
    default: return nullptr;
    }
}

/// A protocol-2 pickle writer emitting only what torch.load(weights_only=True) allows.
class Pickler {
public:
    std::string out;
    void op(char c) { out += c; }
    void global(const std::string& module, const std::string& name) { out += 'c' + module + '\n' + name + '\n'; }
    void str(const std::string& s)
    {
        op('X');
        le(static_cast<std::uint32_t>(s.size()), 4);
        out += s;
    }
    void integer(std::int64_t v)
    {
        if (v >= 0 && v < 256) {
            op('K');
            le(static_cast<std::uint64_t>(v), 1);
        } else if (v >= 0 && v < 65536) {
            op('M');
            le(static_cast<std::uint64_t>(v), 2);
        } else if (v >= INT32_MIN && v <= INT32_MAX) {
            op('J');
            le(static_cast<std::uint64_t>(static_cast<std::uint32_t>(static_cast<std::int32_t>(v))), 4);
        } else {
            op('\x8a');
            le(8, 1);
            le(static_cast<std::uint64_t>(v), 8);
        }
    }
    void intTuple(const Shape& values)
    {
        if (values.empty()) {
            op(')');
            return;
        }
        op('(');
        for (auto v : values)
            integer(v);
        op('t');
    }
    void dtype(DType d) { global("torch", std::string(torchName(d))); }
    /// `torch._utils._rebuild_tensor_v2(storage, 0, shape, stride, False, OrderedDict())`
    void tensor(DType d, const Shape& shape, const std::string& key, std::int64_t numel)
    {
        global("torch._utils", "_rebuild_tensor_v2");
        op('(');
        op('(');
        str("storage");
        global("torch", storageClass(d));
        str(key);
        str("cpu");
        integer(numel);
        op('t');
        op('Q');
        integer(0);
        intTuple(shape);
        intTuple(contiguous(shape));
        op('\x89');
        global("collections", "OrderedDict");
        op(')');
        op('R');
        op('t');
        op('R');
    }
    static Shape contiguous(const Shape& shape)
    {
        Shape strides(shape.size(), 1);
        for (std::size_t d = shape.size(); d-- > 1;)
            strides[d - 1] = strides[d] * shape[d];
        return strides;
    }

private:
    void le(std::uint64_t v, int bytes)
    {
        for (int i = 0; i < bytes; ++i)
            out += static_cast<char>((v >> (8 * i)) & 0xFF);
    }
};

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

struct Record {
    std::string name;
    std::uint64_t offset = 0; ///< local header offset
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
};

class ZipWriter {
public:
    explicit ZipWriter(std::FILE* f, std::string prefix) : m_file(f), m_prefix(std::move(prefix)) { }

    bool begin(const std::string& record, std::uint64_t size)
    {
        Record r;
        r.name = m_prefix + "/" + record;
        r.offset = m_cursor;
        r.size = size;
        // FB padding so the payload starts on a 64-byte boundary, as PyTorchStreamWriter does.
        const std::uint64_t start = m_cursor + 30 + r.name.size() + 4;
        const std::uint64_t padding = (64 - start % 64) % 64;
        std::string h;
        u(h, 0x04034b50, 4);
        entryFields(h);
        u(h, 0, 4);
        u(h, 0, 4);
        u(h, 0, 4);
        u(h, r.name.size(), 2);
        u(h, 4 + padding, 2);
        h += r.name;
        h += "FB";
        u(h, padding, 2);
        h.append(padding, 'Z');
        m_records.push_back(r);
        m_crc = 0;
        return write(h.data(), h.size());
    }
    bool data(const void* bytes, std::uint64_t n)
    {
        m_crc = crc32Update(m_crc, static_cast<const std::uint8_t*>(bytes), static_cast<std::size_t>(n));
        return write(bytes, n);
    }
    bool end()
    {
        Record& r = m_records.back();
        r.crc = m_crc;
        std::string d;
        u(d, 0x08074b50, 4);
        u(d, r.crc, 4);
        if (r.size >= 0xFFFFFFFFu) {
            u(d, r.size, 8);
            u(d, r.size, 8);
        } else {
            u(d, r.size, 4);
            u(d, r.size, 4);
        }
        return write(d.data(), d.size());
    }
    bool finish()
    {
        const std::uint64_t cdStart = m_cursor;
        std::string cd;
        bool zip64 = m_records.size() >= 0xFFFF;
        for (const Record& r : m_records) {
            const bool bigSize = r.size >= 0xFFFFFFFFu, bigOffset = r.offset >= 0xFFFFFFFFu;
            std::string extra;
            if (bigSize || bigOffset) {
                zip64 = true;
                u(extra, 0x0001, 2);
                u(extra, (bigSize ? 16 : 0) + (bigOffset ? 8 : 0), 2);
                if (bigSize) {
                    u(extra, r.size, 8);
                    u(extra, r.size, 8);
                }
                if (bigOffset)
                    u(extra, r.offset, 8);
            }
            u(cd, 0x02014b50, 4);
            u(cd, 45, 2); // version made by
            entryFields(cd);
            u(cd, r.crc, 4);
            u(cd, bigSize ? 0xFFFFFFFFu : r.size, 4);
            u(cd, bigSize ? 0xFFFFFFFFu : r.size, 4);
            u(cd, r.name.size(), 2);
            u(cd, extra.size(), 2);
            u(cd, 0, 2);
            u(cd, 0, 2);
            u(cd, 0, 2);
            u(cd, 0, 4);
            u(cd, bigOffset ? 0xFFFFFFFFu : r.offset, 4);
            cd += r.name;
            cd += extra;
        }
        if (!write(cd.data(), cd.size()))
            return false;
        const std::uint64_t cdSize = cd.size();
        zip64 = zip64 || cdStart >= 0xFFFFFFFFu;
        std::string tail;
        if (zip64) {
            const std::uint64_t eocd64 = m_cursor;
            u(tail, 0x06064b50, 4);
            u(tail, 44, 8);
            u(tail, 45, 2);
            u(tail, 45, 2);
            u(tail, 0, 4);
            u(tail, 0, 4);
            u(tail, m_records.size(), 8);
            u(tail, m_records.size(), 8);
            u(tail, cdSize, 8);
            u(tail, cdStart, 8);
            u(tail, 0x07064b50, 4);
            u(tail, 0, 4);
            u(tail, eocd64, 8);
            u(tail, 1, 4);
        }
        u(tail, 0x06054b50, 4);
        u(tail, 0, 2);
        u(tail, 0, 2);
        u(tail, zip64 ? 0xFFFF : m_records.size(), 2);
        u(tail, zip64 ? 0xFFFF : m_records.size(), 2);
        u(tail, zip64 ? 0xFFFFFFFFu : cdSize, 4);
        u(tail, zip64 ? 0xFFFFFFFFu : cdStart, 4);
        u(tail, 0, 2);
        return write(tail.data(), tail.size());
    }

private:
    static void u(std::string& s, std::uint64_t v, int bytes)
    {
        for (int i = 0; i < bytes; ++i)
            s += static_cast<char>((v >> (8 * i)) & 0xFF);
    }
    /// The fields on which a local header and its central directory entry must agree: version needed 4.5
    /// (ZIP64), flags (sizes in the data descriptor; UTF-8 names), stored, time 00:00 and date 1980-01-01.
    static void entryFields(std::string& s)
    {
        u(s, 45, 2);
        u(s, 0x0808, 2);
        u(s, 0, 2);
        u(s, 0, 2);
        u(s, 33, 2);
    }
    bool write(const void* p, std::uint64_t n)
    {
        m_cursor += n;
        return std::fwrite(p, 1, n, m_file) == n;
    }
    std::FILE* m_file;
    std::string m_prefix;
    std::uint64_t m_cursor = 0;
    std::uint32_t m_crc = 0;
    std::vector<Record> m_records;
};

std::int64_t numelOf(const Shape& shape)
{
    std::int64_t n = 1;
    for (auto s : shape)
        n *= s;
    return n;
}

} // namespace

Status writeTorchSave(const std::string& path, const std::vector<TorchSaveTensor>& tensors, const TorchSaveFill& fill)
{
    // Storage keys: one per tensor ("0", "1", …), then one per DTensor's mesh layout.
    Pickler p;
    p.op('\x80');
    p.op('\x02');
    p.global("collections", "OrderedDict");
    p.op(')');
    p.op('R');
    p.op('(');
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> meshStorages;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const auto& t = tensors[i];
        if (!storageClass(t.dtype))
            return makeError(path + ": " + t.name + ": dtype " + std::string(torchName(t.dtype)) + " cannot be written");
        p.str(t.name);
        const std::string key = std::to_string(i);
        if (!t.dtensor) {
            p.tensor(t.dtype, t.shape, key, numelOf(t.shape));
            continue;
        }
        p.global("torch._tensor", "_rebuild_from_type_v2");
        p.op('(');
        p.global("torch._utils", "_rebuild_wrapper_subclass");
        p.global("torch.distributed.tensor", "DTensor");
        p.op('(');
        p.global("torch.distributed.tensor", "DTensor");
        p.dtype(t.dtype);
        p.intTuple(t.globalShape);
        p.intTuple(Pickler::contiguous(t.globalShape));
        p.integer(0);
        p.global("torch.serialization", "_get_layout");
        p.str("torch.strided");
        p.op('\x85');
        p.op('R');
        p.global("torch", "device");
        p.str("cpu");
        p.op('\x85');
        p.op('R');
        p.op('\x89');
        p.op('t');
        // state = (None, {slots}): DTensor keeps _local_tensor and _spec in __slots__.
        p.op('N');
        p.op('}');
        p.op('(');
        p.str("_local_tensor");
        p.tensor(t.dtype, t.shape, key, numelOf(t.shape));
        p.str("_spec");
        p.global("torch.distributed.tensor._dtensor_spec", "DTensorSpec");
        p.op(')');
        p.op('\x81');
        p.op('}');
        p.op('(');
        p.str("mesh");
        p.global("torch.distributed.device_mesh", "DeviceMesh");
        p.op(')');
        p.op('\x81');
        p.op('}');
        p.op('(');
        p.str("device_type");
        p.str("cpu");
        p.str("mesh");
        const std::string meshKey = std::to_string(tensors.size() + meshStorages.size());
        meshStorages.emplace_back(meshKey, t.mesh.ranks);
        p.tensor(DType::Int64, t.mesh.shape, meshKey, static_cast<std::int64_t>(t.mesh.ranks.size()));
        p.str("mesh_dim_names");
        if (t.mesh.dimNames.empty()) {
            p.op('N');
        } else {
            p.op('(');
            for (const auto& n : t.mesh.dimNames)
                p.str(n);
            p.op('t');
        }
        p.str("_coordinate_on_dim");
        p.op(']');
        p.op('(');
        for (auto c : t.coordinate)
            p.integer(c);
        p.op('e');
        p.op('u');
        p.op('b');
        p.str("placements");
        p.op('(');
        for (const auto& pl : t.placements)
            placement(p, pl);
        p.op('t');
        p.str("tensor_meta");
        p.global("torch.distributed.tensor._dtensor_spec", "TensorMeta");
        p.op('(');
        p.global("torch", "Size");
        p.intTuple(t.globalShape);
        p.op('\x85');
        p.op('R');
        p.intTuple(Pickler::contiguous(t.globalShape));
        p.dtype(t.dtype);
        p.op('t');
        p.op('\x81');
        p.op('u');
        p.op('b');
        p.op('u');
        p.op('\x86');
        p.op('t');
        p.op('R');
    }
    p.op('u');
    p.op('.');

    const std::string prefix = std::filesystem::path(path).stem().string();
    const std::string temp = path + ".tmp";
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(temp.c_str(), "wb"), &std::fclose);
    if (!file)
        return makeError(path + ": cannot be created");
    ZipWriter zip(file.get(), prefix);
    auto ioError = [&] {
        file.reset();
        std::remove(temp.c_str());
        return makeError(path + ": write failed (disk full?)");
    };
    auto record = [&](const std::string& name, const std::string& bytes) {
        return zip.begin(name, bytes.size()) && zip.data(bytes.data(), bytes.size()) && zip.end();
    };
    if (!record("data.pkl", p.out) || !record("byteorder", "little"))
        return ioError();
    // Records in torch 1.13–2.6's order: storage keys sorted as strings.
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < tensors.size() + meshStorages.size(); ++i)
        keys.push_back(std::to_string(i));
    std::sort(keys.begin(), keys.end());
    std::vector<std::uint8_t> buffer;
    for (const auto& key : keys) {
        const std::size_t i = std::stoul(key);
        if (i >= tensors.size()) {
            const auto& ranks = meshStorages[i - tensors.size()].second;
            std::string bytes(ranks.size() * 8, '\0');
            std::memcpy(bytes.data(), ranks.data(), bytes.size());
            if (!record("data/" + key, bytes))
                return ioError();
            continue;
        }
        const std::uint64_t total = static_cast<std::uint64_t>(numelOf(tensors[i].shape)) * dtypeSize(tensors[i].dtype);
        if (!zip.begin("data/" + key, total))
            return ioError();
        for (std::uint64_t off = 0; off < total; off += kChunk) {
            const std::uint64_t n = std::min(kChunk, total - off);
            buffer.resize(n);
            auto status = fill(i, off, buffer.data(), n);
            if (!status) {
                file.reset();
                std::remove(temp.c_str());
                return status.error().withContext(path + ": " + tensors[i].name);
            }
            if (!zip.data(buffer.data(), n))
                return ioError();
        }
        if (!zip.end())
            return ioError();
    }
    if (!record("version", "3\n") || !zip.finish() || std::fflush(file.get()) != 0)
        return ioError();
    file.reset();
    std::error_code ec;
    std::filesystem::rename(temp, path, ec);
    if (ec)
        return makeError(path + ": cannot be renamed into place: " + ec.message());
    return Status::success();
}

} // namespace tessera
