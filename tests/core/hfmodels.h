// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Small Hugging Face models the tests write themselves, for families no shared fixture has.

#include "testutil.h"

#include "formats/safetensors_writer.h"
#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping_rules.h"

#include <cstring>
#include <filesystem>
#include <string>

namespace tessera::test {

/// A Hugging Face folder for `configJson` with every parameter its family's rules expect, each element a distinct
/// bf16 value, so that a misplaced box can never compare equal.
inline std::string writeHfModel(const std::string& configJson, bool valueModel = false)
{
    const std::string dir = makeTempDir() + "/hf";
    std::filesystem::create_directories(dir);
    writeFile(dir + "/config.json", configJson);
    auto config = readHfModelConfig(dir);
    auto rules = config ? selectMappingRules(config->architectures, config->modelType) : Result<MappingRuleSet>(config.error());
    auto vars = rules ? resolveConfigVars(*config, *rules, { { "value_model", valueModel ? 1 : 0 } })
                      : Result<ConfigVars>(rules.error());
    auto expected = vars ? expectedHfParameters(*rules, *vars) : Result<std::vector<ExpectedParameter>>(vars.error());
    if (!expected)
        qFatal("%s", expected.error().message.c_str());
    std::vector<SafetensorsEntry> entries;
    for (const auto& p : *expected)
        entries.push_back({ p.name, DType::BFloat16, p.shape });
    auto layout = planSafetensorsFile(entries, { { "format", "pt" } });
    if (!layout)
        qFatal("%s", layout.error().message.c_str());
    std::string bytes(layout->fileSize, '\0');
    std::memcpy(bytes.data(), layout->header.data(), layout->header.size());
    std::uint16_t next = 0x3c00;
    for (std::size_t i = 0; i < entries.size(); ++i)
        for (std::uint64_t b = 0; b < layout->byteSizes[i]; b += 2, ++next)
            std::memcpy(bytes.data() + layout->dataOffsets[i] + b, &next, 2);
    writeFile(dir + "/model.safetensors", bytes);
    return dir;
}

} // namespace tessera::test
