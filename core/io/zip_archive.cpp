// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/zip_archive.h"

#include "io/crc32.h"

#include <algorithm>
#include <cstdio>

namespace tessera {

namespace {
constexpr std::uint32_t kLocalHeaderSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kEnd64LocatorSig = 0x07064b50;
constexpr std::uint32_t kEnd64Sig = 0x06064b50;
constexpr std::uint64_t kEndSize = 22;
constexpr std::uint64_t kCentralHeaderSize = 46;
constexpr std::uint64_t kLocalHeaderSize = 30;
constexpr std::uint64_t kMaxEntries = 50'000'000;

struct EndRecord {
    std::uint64_t entryCount = 0;
    std::uint64_t centralSize = 0;
    std::uint64_t centralOffset = 0;
};

Result<std::uint64_t> findEndRecord(const ByteView& bytes)
{
    if (bytes.size() < kEndSize)
        return makeError("too short to be a ZIP archive (" + std::to_string(bytes.size()) + " bytes)");
    // The end record is followed by a comment of at most 65535 bytes; search backwards.
    const std::uint64_t lowest = bytes.size() > kEndSize + 65535 ? bytes.size() - kEndSize - 65535 : 0;
    for (std::uint64_t pos = bytes.size() - kEndSize + 1; pos-- > lowest;) {
        if (bytes.u32(pos) == kEndSig && pos + kEndSize + bytes.u16(pos + 20) == bytes.size())
            return pos;
    }
    return makeError("no ZIP end-of-central-directory record: the file is truncated or not a torch.save archive");
}

Result<EndRecord> readEndRecord(const ByteView& bytes)
{
    auto endPos = findEndRecord(bytes);
    TESSERA_TRY(endPos);
    EndRecord end;
    const std::uint64_t pos = *endPos;
    end.entryCount = bytes.u16(pos + 10);
    end.centralSize = bytes.u32(pos + 12);
    end.centralOffset = bytes.u32(pos + 16);
    const bool needs64 = end.entryCount == 0xFFFF || end.centralSize == 0xFFFFFFFF || end.centralOffset == 0xFFFFFFFF;
    if (pos >= 20 && bytes.u32(pos - 20) == kEnd64LocatorSig) {
        const std::uint64_t end64 = bytes.u64(pos - 20 + 8);
        if (!bytes.contains(end64, 56) || bytes.u32(end64) != kEnd64Sig)
            return makeError("the ZIP64 end record points outside the archive: the file is damaged");
        end.entryCount = bytes.u64(end64 + 32);
        end.centralSize = bytes.u64(end64 + 40);
        end.centralOffset = bytes.u64(end64 + 48);
    } else if (needs64) {
        return makeError("the ZIP64 end record is missing: the file is damaged");
    }
    if (!bytes.contains(end.centralOffset, end.centralSize))
        return makeError("the ZIP central directory lies outside the file: the file is truncated or damaged");
    if (end.entryCount > kMaxEntries || end.entryCount * kCentralHeaderSize > end.centralSize + 0)
        return makeError("the ZIP central directory claims " + std::to_string(end.entryCount)
                         + " entries, more than it can hold: the file is damaged");
    return end;
}

/// Applies the ZIP64 extended-information extra field to the sizes and offset that overflowed 32 bits.
Status applyZip64Extra(const ByteView& extra, std::uint64_t& uncompressed, std::uint64_t& compressed,
                       std::uint64_t& localOffset)
{
    std::uint64_t pos = 0;
    while (extra.contains(pos, 4)) {
        const std::uint16_t id = extra.u16(pos);
        const std::uint16_t len = extra.u16(pos + 2);
        if (!extra.contains(pos + 4, len))
            return makeError("a ZIP extra field is truncated: the file is damaged");
        if (id == 0x0001) {
            std::uint64_t at = pos + 4;
            const std::uint64_t stop = pos + 4 + len;
            auto take = [&](std::uint64_t& field) -> bool {
                if (field != 0xFFFFFFFF)
                    return true;
                if (at + 8 > stop)
                    return false;
                field = extra.u64(at);
                at += 8;
                return true;
            };
            if (!take(uncompressed) || !take(compressed) || !take(localOffset))
                return makeError("a ZIP64 extra field is too short: the file is damaged");
        }
        pos += 4 + len;
    }
    return Status::success();
}
} // namespace

bool looksLikeZip(const ByteView& bytes) { return bytes.contains(0, 4) && bytes.u32(0) == kLocalHeaderSig; }

bool looksLikeLegacyTorchSave(const ByteView& bytes)
{
    // pickle(MAGIC_NUMBER) = PROTO 2, LONG1 10 bytes 0x1950a86a20f9469cfc6c, STOP
    static const std::uint8_t magic[] = { 0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19 };
    return bytes.contains(0, sizeof(magic)) && std::equal(magic, magic + sizeof(magic), bytes.data());
}

Result<ZipArchive> ZipArchive::open(const ByteView& bytes, const std::string& displayName)
{
    auto fail = [&](const std::string& message) { return makeError(displayName + ": " + message); };
    if (bytes.empty())
        return fail("the file is empty");
    if (!looksLikeZip(bytes)) {
        if (looksLikeLegacyTorchSave(bytes))
            return fail("this is torch's legacy (pre-1.6, _use_new_zipfile_serialization=False) format, which "
                        "Tessera does not read; re-save it with a current torch.save");
        return fail("not a torch.save archive (it does not start with a ZIP header)");
    }
    auto end = readEndRecord(bytes);
    if (!end)
        return end.error().withContext(displayName);

    ZipArchive archive;
    archive.m_bytes = bytes;
    archive.m_displayName = displayName;
    archive.m_entries.reserve(static_cast<std::size_t>(end->entryCount));
    std::uint64_t pos = end->centralOffset;
    const std::uint64_t stop = end->centralOffset + end->centralSize;
    for (std::uint64_t i = 0; i < end->entryCount; ++i) {
        if (pos + kCentralHeaderSize > stop || bytes.u32(pos) != kCentralSig)
            return fail("ZIP central directory entry " + std::to_string(i) + " is damaged");
        const std::uint16_t method = bytes.u16(pos + 10);
        const std::uint32_t crc = bytes.u32(pos + 16);
        std::uint64_t compressed = bytes.u32(pos + 20);
        std::uint64_t uncompressed = bytes.u32(pos + 24);
        const std::uint16_t nameLen = bytes.u16(pos + 28);
        const std::uint16_t extraLen = bytes.u16(pos + 30);
        const std::uint16_t commentLen = bytes.u16(pos + 32);
        std::uint64_t localOffset = bytes.u32(pos + 42);
        const std::uint64_t varLen = std::uint64_t(nameLen) + extraLen + commentLen;
        if (pos + kCentralHeaderSize + varLen > stop)
            return fail("ZIP central directory entry " + std::to_string(i) + " is truncated");
        Entry entry;
        entry.name.assign(reinterpret_cast<const char*>(bytes.data() + pos + kCentralHeaderSize), nameLen);
        auto extra = bytes.slice(pos + kCentralHeaderSize + nameLen, extraLen);
        auto applied = applyZip64Extra(*extra, uncompressed, compressed, localOffset);
        if (!applied)
            return fail(applied.error().message);
        if (!bytes.contains(localOffset, kLocalHeaderSize) || bytes.u32(localOffset) != kLocalHeaderSig)
            return fail("record '" + entry.name + "' points to a damaged local header");
        const std::uint64_t dataOffset
            = localOffset + kLocalHeaderSize + bytes.u16(localOffset + 26) + bytes.u16(localOffset + 28);
        if (method == 0 && compressed != uncompressed)
            return fail("record '" + entry.name + "' has inconsistent sizes");
        if (!bytes.contains(dataOffset, compressed))
            return fail("record '" + entry.name + "' extends past the end of the file: the file is truncated");
        entry.offset = dataOffset;
        entry.size = method == 0 ? uncompressed : compressed;
        entry.method = method;
        entry.crc32 = crc;
        if (!archive.m_index.emplace(entry.name, archive.m_entries.size()).second)
            return fail("record '" + entry.name + "' appears twice");
        archive.m_entries.push_back(std::move(entry));
        pos += kCentralHeaderSize + varLen;
    }
    if (archive.m_entries.empty())
        return fail("the ZIP archive is empty");
    const auto& first = archive.m_entries.front().name;
    const auto slash = first.find('/');
    if (slash == std::string::npos || slash == 0)
        return fail("records are not inside a top-level folder, so this is not a torch.save archive");
    archive.m_prefix = first.substr(0, slash);
    for (const auto& entry : archive.m_entries)
        if (entry.name.compare(0, slash + 1, first, 0, slash + 1) != 0)
            return fail("record '" + entry.name + "' lies outside the archive folder '" + archive.m_prefix + "/'");
    return archive;
}

const ZipArchive::Entry* ZipArchive::findRecord(const std::string& record) const
{
    auto it = m_index.find(m_prefix + "/" + record);
    return it == m_index.end() ? nullptr : &m_entries[it->second];
}

Result<ByteView> ZipArchive::read(const Entry& entry) const
{
    if (entry.method != 0)
        return compressedRecord(m_displayName, entry.name, entry.method);
    auto view = m_bytes.slice(entry.offset, entry.size);
    if (!view)
        return view.error().withContext(m_displayName + ": record '" + entry.name + "'");
    const std::uint32_t computed = crc32Update(0, view->data(), static_cast<std::size_t>(view->size()));
    if (computed != entry.crc32)
        return crcMismatch(m_displayName, entry.name, entry.crc32, computed);
    return view;
}

Error ZipArchive::crcMismatch(const std::string& displayName, const std::string& record, std::uint32_t stored,
                              std::uint32_t computed)
{
    char numbers[64];
    std::snprintf(numbers, sizeof numbers, "the archive records %08x, the bytes give %08x", stored, computed);
    return makeError(displayName + ": CRC-32 mismatch in record '" + record + "' (" + numbers
                     + "): the file is corrupt; copy it again from where it was written");
}

Error ZipArchive::compressedRecord(const std::string& displayName, const std::string& record, std::uint16_t method)
{
    return makeError(displayName + ": record '" + record + "' is compressed (ZIP method " + std::to_string(method)
                     + (method == 8 ? ", deflate" : "")
                     + "); torch.save stores every record uncompressed, so the file was re-zipped by another tool: "
                       "load and save it again with torch.save");
}

} // namespace tessera
