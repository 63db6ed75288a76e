// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "io/mapped_file.h"
#include "result.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera {

/// A read-only view of a ZIP archive (ZIP64 too) as torch.save writes it: records stored uncompressed,
/// located through the central directory. The archive may sit at an offset inside a larger file (a DCP
/// `.distcp` item): pass the slice, and all offsets are taken relative to it.
class ZipArchive {
public:
    struct Entry {
        std::string name;            ///< full name, e.g. "archive/data/0"
        std::uint64_t offset = 0;    ///< payload offset relative to the archive start
        std::uint64_t size = 0;      ///< payload size (stored: compressed == uncompressed)
        std::uint16_t method = 0;    ///< 0 = stored
        std::uint32_t crc32 = 0;     ///< CRC-32 of the payload, from the central directory
    };

    /// Parses the central directory of `bytes`. `displayName` names the file in errors.
    static Result<ZipArchive> open(const ByteView& bytes, const std::string& displayName);

    /// The top-level folder every record lives in ("archive", "model_world_size_2_rank_0", …).
    const std::string& prefix() const { return m_prefix; }
    const std::vector<Entry>& entries() const { return m_entries; }
    /// The entry named `prefix()/record`, or nullptr.
    const Entry* findRecord(const std::string& record) const;
    /// The bytes of a stored entry (bounds-checked, zero copy), checked against the entry's CRC-32. For the small
    /// records read whole (data.pkl, byteorder); tensor storages are checked while a merge streams them.
    Result<ByteView> read(const Entry& entry) const;
    /// The error for a record whose bytes do not match its CRC-32.
    static Error crcMismatch(const std::string& displayName, const std::string& record, std::uint32_t stored,
                             std::uint32_t computed);
    /// The error for a record that is not stored uncompressed (torch.save never compresses).
    static Error compressedRecord(const std::string& displayName, const std::string& record, std::uint16_t method);
    const std::string& displayName() const { return m_displayName; }

private:
    ByteView m_bytes;
    std::string m_displayName;
    std::string m_prefix;
    std::vector<Entry> m_entries;
    std::unordered_map<std::string, std::size_t> m_index;
};

/// True when `bytes` starts like a ZIP archive (local file header signature).
bool looksLikeZip(const ByteView& bytes);
/// True when `bytes` starts like torch's pre-1.6 serialization (a pickled magic number).
bool looksLikeLegacyTorchSave(const ByteView& bytes);

} // namespace tessera
