// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "io/mapped_file.h"
#include "pickle/pickle_value.h"
#include "result.h"
#include "io/zip_archive.h"

#include <memory>
#include <string>

namespace tessera {

/// Where a storage record's bytes are, as absolute offsets in the mapped file.
struct StorageSpan {
    std::uint64_t begin = 0;
    std::uint64_t bytes = 0;
    std::uint32_t crc32 = 0; ///< what the archive stores for the record; checked when its bytes are used
};

/// A torch.save archive: its unpickled `data.pkl` and its storage records, read in place from an mmap.
/// The archive may be a whole `.pt` file or an item embedded in a DCP `.distcp` file.
class TorchSaveFile {
public:
    /// Opens the archive at [offset, offset+length) of `file` and unpickles its data.pkl (no tensor data is read).
    static Result<TorchSaveFile> open(std::shared_ptr<MappedFile> file, std::uint64_t offset, std::uint64_t length,
                                      const std::string& displayName);
    /// Maps `path` and opens it as a whole.
    static Result<TorchSaveFile> open(const std::string& path);

    const PyRef& root() const { return m_root; }
    /// Frees the unpickled tree once the caller has taken what it needs (storages stay readable).
    void dropPickle() { m_root.reset(); }
    const std::string& path() const { return m_file->path(); }
    const std::string& displayName() const { return m_displayName; }
    const std::shared_ptr<MappedFile>& file() const { return m_file; }
    /// The archive's records (ZIP entries), for a copy of the archive as it is.
    const ZipArchive& archive() const { return m_zip; }

    /// The storage record `data/<key>`, checked to be stored uncompressed and to hold at least the storage's
    /// declared size. Its bytes are not read here (inspect stays fast); the CRC is checked by their consumers.
    Result<StorageSpan> storageSpan(const StorageRef& storage) const;
    /// A Piece for `tensor` placed at `offsets` in its global tensor; checks every element lies in its storage.
    /// `localOffsets` selects a sub-box of the tensor starting there (empty = the whole tensor), `boxShape` its shape.
    Result<Piece> piece(const TensorRef& tensor, const Shape& offsets, const Shape& localOffsets = {},
                        const Shape& boxShape = {}) const;
    /// Reads a small integer tensor (a DeviceMesh's rank layout) into memory.
    Result<std::vector<std::int64_t>> readIntTensor(const TensorRef& tensor) const;

private:
    std::shared_ptr<MappedFile> m_file;
    std::string m_displayName;
    std::uint64_t m_baseOffset = 0; ///< where the archive starts in the file
    ZipArchive m_zip;
    PyRef m_root;
    bool m_bigEndian = false;
};

/// Row-major contiguous strides for `shape`.
Shape contiguousStrides(const Shape& shape);

} // namespace tessera
