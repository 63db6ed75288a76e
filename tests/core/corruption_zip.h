// SPDX-License-Identifier: GPL-3.0-or-later
// Test-side ZIP surgery for the corruption matrix. A case that means to reach the pickle parser must hand it a
// pickle whose ZIP CRC-32 is right, or it only tests the CRC check; these helpers rewrite a torch.save archive
// with one record replaced and every CRC recomputed. They are written independently of core/io so that a bug
// there cannot hide itself by producing the inputs that test it.
#pragma once

#include "text_util.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera::test::zip {

inline std::uint32_t crc32(const std::string& bytes)
{
    static const std::vector<std::uint32_t> table = [] {
        std::vector<std::uint32_t> t(256);
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k)
                c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    std::uint32_t c = 0xFFFFFFFFu;
    for (unsigned char b : bytes)
        c = table[(c ^ b) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

inline std::uint32_t le32(const std::string& b, std::size_t pos)
{
    return std::uint32_t(std::uint8_t(b[pos])) | std::uint32_t(std::uint8_t(b[pos + 1])) << 8
        | std::uint32_t(std::uint8_t(b[pos + 2])) << 16 | std::uint32_t(std::uint8_t(b[pos + 3])) << 24;
}
inline std::uint16_t le16(const std::string& b, std::size_t pos)
{
    return std::uint16_t(std::uint8_t(b[pos]) | std::uint8_t(b[pos + 1]) << 8);
}
inline void put32(std::string& b, std::uint32_t v)
{
    for (int i = 0; i < 4; ++i)
        b.push_back(char((v >> (8 * i)) & 0xFF));
}
inline void put16(std::string& b, std::uint16_t v)
{
    b.push_back(char(v & 0xFF));
    b.push_back(char(v >> 8));
}
inline void set32(std::string& b, std::size_t pos, std::uint32_t v)
{
    for (int i = 0; i < 4; ++i)
        b[pos + i] = char((v >> (8 * i)) & 0xFF);
}

/// One record of a stored (uncompressed) archive: where its central entry and payload are in the file.
struct Record {
    std::string name;
    std::string payload;
    std::size_t centralPos = 0; ///< offset of its central directory entry
    std::size_t dataPos = 0;    ///< offset of its payload
};

/// The records of a small (non-ZIP64) stored archive, read through its central directory; nullopt if the bytes
/// are not such an archive (the fixtures always are).
inline std::optional<std::vector<Record>> readRecords(const std::string& bytes)
{
    if (bytes.size() < 22)
        return std::nullopt;
    std::size_t end = bytes.size() - 22;
    while (end > 0 && le32(bytes, end) != 0x06054b50)
        --end;
    if (le32(bytes, end) != 0x06054b50)
        return std::nullopt;
    const std::size_t count = le16(bytes, end + 10);
    std::size_t pos = le32(bytes, end + 16);
    std::vector<Record> records;
    for (std::size_t i = 0; i < count; ++i) {
        if (pos + 46 > bytes.size() || le32(bytes, pos) != 0x02014b50)
            return std::nullopt;
        Record r;
        const std::size_t size = le32(bytes, pos + 20);
        const std::size_t nameLen = le16(bytes, pos + 28);
        const std::size_t varLen = nameLen + le16(bytes, pos + 30) + le16(bytes, pos + 32);
        const std::size_t local = le32(bytes, pos + 42);
        r.name = bytes.substr(pos + 46, nameLen);
        r.centralPos = pos;
        r.dataPos = local + 30 + le16(bytes, local + 26) + le16(bytes, local + 28);
        if (r.dataPos + size > bytes.size())
            return std::nullopt;
        r.payload = bytes.substr(r.dataPos, size);
        records.push_back(std::move(r));
        pos += 46 + varLen;
    }
    return records;
}

/// A stored archive of `records` with correct CRC-32s and torch.save's 64-byte payload alignment (an "FB"
/// padding extra field), as torch.load and Tessera expect.
inline std::string writeArchive(const std::vector<Record>& records)
{
    std::string out;
    std::vector<std::uint32_t> localOffsets;
    for (const auto& r : records) {
        localOffsets.push_back(std::uint32_t(out.size()));
        const std::size_t unpadded = out.size() + 30 + r.name.size() + 4;
        const std::uint16_t pad = std::uint16_t((64 - unpadded % 64) % 64);
        put32(out, 0x04034b50);
        put16(out, 20);
        put16(out, 0);
        put16(out, 0); // stored
        put16(out, 0);
        put16(out, 0);
        put32(out, crc32(r.payload));
        put32(out, std::uint32_t(r.payload.size()));
        put32(out, std::uint32_t(r.payload.size()));
        put16(out, std::uint16_t(r.name.size()));
        put16(out, std::uint16_t(4 + pad));
        out += r.name;
        put16(out, 0x4246); // "FB"
        put16(out, pad);
        out.append(pad, 'Z');
        out += r.payload;
    }
    const std::size_t centralStart = out.size();
    for (std::size_t i = 0; i < records.size(); ++i) {
        const auto& r = records[i];
        put32(out, 0x02014b50);
        put16(out, 20);
        put16(out, 20);
        put16(out, 0);
        put16(out, 0);
        put16(out, 0);
        put16(out, 0);
        put32(out, crc32(r.payload));
        put32(out, std::uint32_t(r.payload.size()));
        put32(out, std::uint32_t(r.payload.size()));
        put16(out, std::uint16_t(r.name.size()));
        put16(out, 0);
        put16(out, 0);
        put16(out, 0);
        put16(out, 0);
        put32(out, 0);
        put32(out, localOffsets[i]);
        out += r.name;
    }
    const std::size_t centralSize = out.size() - centralStart;
    put32(out, 0x06054b50);
    put16(out, 0);
    put16(out, 0);
    put16(out, std::uint16_t(records.size()));
    put16(out, std::uint16_t(records.size()));
    put32(out, std::uint32_t(centralSize));
    put32(out, std::uint32_t(centralStart));
    put16(out, 0);
    return out;
}

/// Rewrites the archive `bytes` with the payload of the record whose name ends in `suffix` passed through
/// `edit`, all CRCs correct. Empty when there is no such record.
inline std::string rewriteRecord(const std::string& bytes, const std::string& suffix,
                                 const std::function<std::string(const std::string&)>& edit)
{
    auto records = readRecords(bytes);
    if (!records)
        return {};
    bool found = false;
    for (auto& r : *records)
        if (endsWith(r.name, suffix)) {
            r.payload = edit(r.payload);
            found = true;
            break;
        }
    return found ? writeArchive(*records) : std::string();
}

/// The payload of the record whose name ends in `suffix`, or nullopt.
inline std::optional<Record> findRecord(const std::string& bytes, const std::string& suffix)
{
    auto records = readRecords(bytes);
    if (!records)
        return std::nullopt;
    for (auto& r : *records)
        if (endsWith(r.name, suffix))
            return r;
    return std::nullopt;
}

} // namespace tessera::test::zip
