// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/torch_save.h"
#include "io/printable.h"

#include "io/crc32.h"
#include "pickle/unpickler.h"

#include <cstring>

namespace tessera {

Shape contiguousStrides(const Shape& shape)
{
    Shape strides(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;)
        strides[i - 1] = strides[i] * std::max<std::int64_t>(shape[i], 1);
    return strides;
}

Result<TorchSaveFile> TorchSaveFile::open(std::shared_ptr<MappedFile> file, std::uint64_t offset,
                                          std::uint64_t length, const std::string& displayName)
{
    auto slice = file->view().slice(offset, length);
    if (!slice)
        return slice.error().withContext(displayName);
    auto zip = ZipArchive::open(*slice, displayName);
    TESSERA_TRY(zip);
    if (zip->findRecord("constants.pkl"))
        return makeError(displayName + ": this is a TorchScript archive (torch.jit.save), not a state dict");
    const auto* pkl = zip->findRecord("data.pkl");
    if (!pkl)
        return makeError(displayName + ": the archive has no data.pkl record, so it is not a torch.save file");
    auto pklBytes = zip->read(*pkl);
    TESSERA_TRY(pklBytes);
    auto root = unpickle(*pklBytes, displayName);
    TESSERA_TRY(root);

    TorchSaveFile result;
    result.m_file = std::move(file);
    result.m_displayName = displayName;
    result.m_baseOffset = offset;
    result.m_zip = std::move(*zip);
    result.m_root = std::move(*root);
    if (const auto* order = result.m_zip.findRecord("byteorder")) {
        auto bytes = result.m_zip.read(*order);
        TESSERA_TRY(bytes);
        result.m_bigEndian = bytes->asString() == "big";
    }
    return result;
}

Result<TorchSaveFile> TorchSaveFile::open(const std::string& path)
{
    auto file = MappedFile::open(path);
    TESSERA_TRY(file);
    const auto size = (*file)->size();
    return open(std::move(*file), 0, size, path);
}

Result<StorageSpan> TorchSaveFile::storageSpan(const StorageRef& storage) const
{
    const auto* entry = m_zip.findRecord("data/" + storage.key);
    if (!entry)
        return makeError(m_displayName + ": storage record 'data/" + printableText(storage.key)
                         + "' is missing from the archive");
    if (entry->method != 0)
        return ZipArchive::compressedRecord(m_displayName, entry->name, entry->method);
    const std::uint64_t need = storage.numel * dtypeSize(storage.dtype);
    if (need / std::max<std::size_t>(dtypeSize(storage.dtype), 1) != storage.numel || entry->size < need)
        return makeError(m_displayName + ": storage record 'data/" + printableText(storage.key) + "' holds "
                         + std::to_string(entry->size)
                         + " bytes but the pickle declares " + std::to_string(need));
    if (m_bigEndian && dtypeSize(storage.dtype) > 1)
        return makeError(m_displayName + ": the archive was written on a big-endian machine; Tessera reads "
                                         "little-endian checkpoints only");
    return StorageSpan { m_baseOffset + entry->offset, entry->size, entry->crc32 };
}

Result<Piece> TorchSaveFile::piece(const TensorRef& tensor, const Shape& offsets, const Shape& localOffsets,
                                   const Shape& boxShape) const
{
    if (!tensor.storage)
        return makeError(m_displayName + ": a meta tensor has no data to read");
    auto span = storageSpan(*tensor.storage);
    TESSERA_TRY(span);
    const std::size_t item = dtypeSize(tensor.dtype);
    if (item == 0)
        return makeError(m_displayName + ": tensor of unsupported dtype " + std::string(torchName(tensor.dtype)));
    Piece p;
    p.file = m_file->path();
    p.offsets = offsets;
    p.shape = boxShape.empty() && localOffsets.empty() ? tensor.shape : boxShape;
    p.strides = tensor.strides;
    p.storedDtype = tensor.dtype;
    p.storageBegin = span->begin;
    p.storageBytes = span->bytes;
    p.storageCrc32 = span->crc32;
    p.storageRecord = "data/" + tensor.storage->key;
    if (p.shape.size() != tensor.shape.size() || (!localOffsets.empty() && localOffsets.size() != tensor.shape.size()))
        return makeError(m_displayName + ": piece rank does not match the tensor");
    // First and last element (in items) of the box; every element lies between them as strides are >= 0.
    // Checked arithmetic: a hostile pickle may declare sizes that overflow 64 bits.
    std::uint64_t first = static_cast<std::uint64_t>(tensor.storageOffset);
    std::uint64_t last = first;
    bool empty = false;
    bool overflow = false;
    for (std::size_t k = 0; k < p.shape.size(); ++k) {
        const std::int64_t start = localOffsets.empty() ? 0 : localOffsets[k];
        if (start < 0 || p.shape[k] < 0 || start > tensor.shape[k] || p.shape[k] > tensor.shape[k] - start)
            return makeError(m_displayName + ": piece box outside the local tensor");
        const auto stride = static_cast<std::uint64_t>(tensor.strides[k]);
        std::uint64_t step = 0;
        overflow |= __builtin_mul_overflow(static_cast<std::uint64_t>(start), stride, &step);
        overflow |= __builtin_add_overflow(first, step, &first);
        if (p.shape[k] == 0) {
            empty = true;
        } else {
            overflow |= __builtin_mul_overflow(static_cast<std::uint64_t>(start + p.shape[k] - 1), stride, &step);
            overflow |= __builtin_add_overflow(last, step, &last);
        }
    }
    std::uint64_t firstByte = 0;
    std::uint64_t endByte = 0;
    overflow |= __builtin_mul_overflow(first, static_cast<std::uint64_t>(item), &firstByte);
    overflow |= __builtin_mul_overflow(last + 1, static_cast<std::uint64_t>(item), &endByte);
    if (!empty && (overflow || endByte > span->bytes))
        return makeError(m_displayName + ": a tensor reaches past the end of its storage record 'data/"
                         + tensor.storage->key + "' (the file is damaged)");
    p.dataOffset = span->begin + (empty ? 0 : firstByte);
    return p;
}

Result<std::vector<std::int64_t>> TorchSaveFile::readIntTensor(const TensorRef& tensor) const
{
    if (tensor.dtype != DType::Int32 && tensor.dtype != DType::Int64)
        return makeError(m_displayName + ": expected an integer tensor");
    Shape zero(tensor.shape.size(), 0);
    auto p = piece(tensor, zero);
    TESSERA_TRY(p);
    std::uint64_t numel = 1;
    for (auto d : tensor.shape)
        numel *= static_cast<std::uint64_t>(d);
    if (numel > 1'000'000)
        return makeError(m_displayName + ": integer tensor too large for metadata");
    // The values steer how every piece is placed, so their record is checked like data.pkl (it is small).
    const auto* base = m_file->view().data();
    const std::uint32_t crc = crc32Update(0, base + p->storageBegin, static_cast<std::size_t>(p->storageBytes));
    if (p->storageCrc32 && crc != *p->storageCrc32)
        return ZipArchive::crcMismatch(m_displayName, p->storageRecord, *p->storageCrc32, crc);
    std::vector<std::int64_t> values;
    values.reserve(static_cast<std::size_t>(numel));
    const std::size_t item = dtypeSize(tensor.dtype);
    std::vector<std::int64_t> index(tensor.shape.size(), 0);
    for (std::uint64_t n = 0; n < numel; ++n) {
        std::uint64_t elem = 0;
        for (std::size_t k = 0; k < index.size(); ++k)
            elem += static_cast<std::uint64_t>(index[k] * tensor.strides[k]);
        const auto* at = base + p->dataOffset + elem * item;
        if (item == 4) {
            std::int32_t v;
            std::memcpy(&v, at, 4);
            values.push_back(v);
        } else {
            std::int64_t v;
            std::memcpy(&v, at, 8);
            values.push_back(v);
        }
        for (std::size_t k = index.size(); k-- > 0;) {
            if (++index[k] < tensor.shape[k])
                break;
            index[k] = 0;
        }
    }
    return values;
}

} // namespace tessera
