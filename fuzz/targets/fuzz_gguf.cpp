// SPDX-License-Identifier: GPL-3.0-or-later
// A GGUF file's header: metadata of every value type (arrays of strings and numbers), tensor infos, alignment,
// and every tensor's data checked against the file's size; then the names mapped back to Hugging Face's.

#include "fuzz_targets.h"

#include "formats/gguf_file.h"
#include "formats/gguf_names.h"

namespace tessera::fuzz {

int fuzzGguf(const std::uint8_t* data, std::size_t size)
{
    const ByteView bytes(nullptr, data, size);
    auto header = parseGgufHeader(bytes);
    if (!header)
        return 0;
    for (const auto& kv : header->metadata)
        (void)kv.value.summary(64);
    for (const auto& t : header->tensors)
        (void)hfTensorName(t.name, 0, false);
    return 0;
}

} // namespace tessera::fuzz
