// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

/// CRC-32 as ZIP defines it (reflected polynomial 0xEDB88320, initial value and final xor 0xFFFFFFFF), so that
/// `crc32Update(0, …)` over a record's bytes equals the CRC its ZIP headers store. Streaming:
/// `crc32Update(crc32Update(0, a, n), b, m)` is the CRC of a followed by b.
/// Slicing-by-8 tables keep it fast enough to check every tensor a merge copies (several GB/s per core).
std::uint32_t crc32Update(std::uint32_t crc, const std::uint8_t* data, std::size_t length);

/// The CRC-32 of A followed by B from crc(A), crc(B) and B's length, without the bytes: blocks checksummed on
/// several threads as they are written combine into the CRC of the range they tile.
std::uint32_t crc32Combine(std::uint32_t crcA, std::uint32_t crcB, std::uint64_t lengthB);

} // namespace tessera
