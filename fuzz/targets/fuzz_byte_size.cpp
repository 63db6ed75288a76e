// SPDX-License-Identifier: GPL-3.0-or-later
// The byte-size parser behind --max_shard_size, and the formatter that prints sizes back.

#include "fuzz_targets.h"

#include "io/byte_size.h"

#include <string_view>

namespace tessera::fuzz {

int fuzzByteSize(const std::uint8_t* data, std::size_t size)
{
    auto bytes = parseByteSize(std::string_view(reinterpret_cast<const char*>(data), size));
    if (bytes)
        (void)formatBytes(*bytes);
    return 0;
}

} // namespace tessera::fuzz
