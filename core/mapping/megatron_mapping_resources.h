// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The built-in Megatron → Hugging Face rule files, compiled into the core from resources/mapping/*.json by
// cmake/EmbedMappingRules.cmake (the core has no Qt, so no Qt resources).

#include <vector>

namespace tessera {

/// One embedded file.
struct EmbeddedResource {
    const char* name; ///< file name, e.g. "llama.json"
    const char* text; ///< its contents
};

/// Every built-in rule file, sorted by name.
const std::vector<EmbeddedResource>& embeddedMappingRules();

} // namespace tessera
