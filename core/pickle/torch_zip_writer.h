// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The ZIP archive of a torch.save file, written as PyTorchStreamWriter writes it: records named "<prefix>/<name>",
// stored (not compressed), each payload on a 64-byte boundary (an "FB" extra field of 'Z' padding), sizes and CRC-32
// in a data descriptor after the payload, ZIP64 fields where sizes, offsets or counts need them.

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

class ZipWriter {
public:
    ZipWriter(std::FILE* f, std::string prefix) : m_file(f), m_prefix(std::move(prefix)) { }
    std::uint64_t cursor() const { return m_cursor; }
    /// The bytes of the current record's payload written so far (0 before the first record).
    std::uint64_t recordBytes() const { return m_records.empty() ? 0 : m_written; }
    /// The records written so far, named with their CRC-32: what the archive holds, wherever it is written.
    std::string contentKey() const;

    /// Starts the record `record` of `size` bytes: its local header and padding. False when the write fails.
    bool begin(const std::string& record, std::uint64_t size);
    /// Appends `n` bytes to the current record's payload.
    bool data(const void* bytes, std::uint64_t n);
    /// Ends the current record: its data descriptor.
    bool end();
    /// The central directory and its end records, after the last record.
    bool finish();

private:
    struct Record {
        std::string name;
        std::uint64_t offset = 0; ///< local header offset
        std::uint64_t size = 0;
        std::uint32_t crc = 0;
    };

    static void u(std::string& s, std::uint64_t v, int bytes);
    /// The fields on which a local header and its central directory entry must agree: version needed 4.5
    /// (ZIP64), flags (sizes in the data descriptor; UTF-8 names), stored, time 00:00 and date 1980-01-01.
    static void entryFields(std::string& s);
    bool write(const void* p, std::uint64_t n);

    std::FILE* m_file;
    std::string m_prefix;
    std::uint64_t m_cursor = 0;
    std::uint32_t m_crc = 0;
    std::uint64_t m_written = 0;
    std::vector<Record> m_records;
};

} // namespace tessera
