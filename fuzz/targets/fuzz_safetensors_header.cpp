// SPDX-License-Identifier: GPL-3.0-or-later
// A safetensors file: the header length, the JSON header and every tensor's dtype, shape and offsets, validated
// against the file's size as the reference implementation does.

#include "fuzz_targets.h"

#include "formats/safetensors_reader.h"

#include <string_view>

namespace tessera::fuzz {

int fuzzSafetensorsHeader(const std::uint8_t* data, std::size_t size)
{
    const ByteView bytes(nullptr, data, size);
    (void)findInvalidUtf8(bytes.asString());
    auto header = readSafetensorsHeader(bytes, "fuzz.safetensors");
    if (!header)
        return 0;
    for (const auto& tensor : header->tensors)
        (void)formatShape(tensor.shape);
    return 0;
}

} // namespace tessera::fuzz
