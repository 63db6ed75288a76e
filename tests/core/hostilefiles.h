// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Building blocks for the hostile-input tests: raw pickle opcodes and a stored ZIP around them, so a test can
// write exactly the malformed torch.save file an attacker would, in a few hundred bytes.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::test {

/// `value` as `bytes` little-endian bytes appended to `out`.
inline void putLe(std::string& out, std::uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

inline std::uint32_t crc32Of(const std::string& bytes)
{
    std::uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char c : bytes) {
        crc ^= c;
        for (int k = 0; k < 8; ++k)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/// A stored (uncompressed) ZIP archive of `records` with correct CRCs, as torch.save writes them.
inline std::string zipStored(const std::vector<std::pair<std::string, std::string>>& records)
{
    std::string out, central;
    for (const auto& [name, data] : records) {
        const std::uint64_t offset = out.size();
        const std::uint32_t crc = crc32Of(data);
        putLe(out, 0x04034b50, 4);
        putLe(out, 20, 2);
        putLe(out, 0, 2);
        putLe(out, 0, 2);
        putLe(out, 0, 4);
        putLe(out, crc, 4);
        putLe(out, data.size(), 4);
        putLe(out, data.size(), 4);
        putLe(out, name.size(), 2);
        putLe(out, 0, 2);
        out += name + data;
        putLe(central, 0x02014b50, 4);
        putLe(central, 20, 2);
        putLe(central, 20, 2);
        putLe(central, 0, 2);
        putLe(central, 0, 2);
        putLe(central, 0, 4);
        putLe(central, crc, 4);
        putLe(central, data.size(), 4);
        putLe(central, data.size(), 4);
        putLe(central, name.size(), 2);
        putLe(central, 0, 6);
        putLe(central, 0, 2);
        putLe(central, 0, 4);
        putLe(central, offset, 4);
        central += name;
    }
    const std::uint64_t centralOffset = out.size();
    out += central;
    putLe(out, 0x06054b50, 4);
    putLe(out, 0, 4);
    putLe(out, records.size(), 2);
    putLe(out, records.size(), 2);
    putLe(out, central.size(), 4);
    putLe(out, centralOffset, 4);
    putLe(out, 0, 2);
    return out;
}

/// A torch.save file whose data.pkl is `pickle` and which has no storages.
inline std::string torchSaveOf(const std::string& pickle)
{
    return zipStored({ { "archive/data.pkl", pickle }, { "archive/byteorder", "little" }, { "archive/version", "3\n" } });
}

/// SHORT_BINUNICODE-free string opcode (BINUNICODE), valid in every protocol torch reads.
inline std::string pickleStr(const std::string& s)
{
    std::string out = "X";
    putLe(out, s.size(), 4);
    return out + s;
}

/// BININT (a signed 32-bit int) or, for larger values, LONG1 with 8 bytes.
inline std::string pickleInt(std::int64_t v)
{
    std::string out;
    if (v >= INT32_MIN && v <= INT32_MAX) {
        out = "J";
        putLe(out, static_cast<std::uint32_t>(v), 4);
    } else {
        out = "\x8a\x08";
        putLe(out, static_cast<std::uint64_t>(v), 8);
    }
    return out;
}

/// argparse.Namespace(**values) as NEWOBJ + BUILD, as Megatron-LM's `args` is pickled.
inline std::string pickleNamespace(const std::vector<std::pair<std::string, std::int64_t>>& values)
{
    std::string out = "cargparse\nNamespace\n)\x81}(";
    for (const auto& [key, value] : values)
        out += pickleStr(key) + pickleInt(value);
    return out + "ub";
}

} // namespace tessera::test
