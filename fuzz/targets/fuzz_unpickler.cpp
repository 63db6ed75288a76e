// SPDX-License-Identifier: GPL-3.0-or-later
// The restricted unpickler with torch's allow-list, as it reads data.pkl of every torch.save file and DCP's
// .metadata; then what the readers do with its result: render it for messages and walk it as a state dict.

#include "fuzz_targets.h"

#include "pickle/saved_tensor.h"
#include "pickle/unpickler.h"

namespace tessera::fuzz {

int fuzzUnpickler(const std::uint8_t* data, std::size_t size)
{
    const ByteView bytes(nullptr, data, size);
    auto value = unpickle(bytes, "fuzz.pkl");
    if (!value || !*value)
        return 0;
    (void)(*value)->repr();
    for (const auto& [name, item] : stateDictItems(*value))
        (void)name, (void)item;
    return 0;
}

} // namespace tessera::fuzz
