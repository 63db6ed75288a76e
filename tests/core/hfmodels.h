// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Small Hugging Face models the tests write themselves, for families no shared fixture has.

#include "testutil.h"

#include "formats/safetensors_reader.h"
#include "formats/safetensors_writer.h"
#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping_rules.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

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

/// A copy of the Hugging Face folder `source` (one model.safetensors beside its config and tokenizer files) without
/// the tensors named in `drop`, every other byte as it was: a model saved with parameters missing.
inline std::string copyHfModelWithout(const std::string& source, const std::vector<std::string>& drop)
{
    const std::string dir = makeTempDir() + "/hf";
    std::filesystem::create_directories(dir);
    for (const auto& entry : std::filesystem::directory_iterator(source))
        if (entry.is_regular_file() && entry.path().filename() != "model.safetensors") {
            const std::string copy = dir + "/" + entry.path().filename().string();
            std::filesystem::copy_file(entry.path(), copy);
            std::filesystem::permissions(copy, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
        }
    auto header = readSafetensorsFile(source + "/model.safetensors");
    if (!header)
        qFatal("%s", header.error().message.c_str());
    const std::string bytes = readFile(source + "/model.safetensors");
    std::vector<SafetensorsEntry> entries;
    std::vector<const SafetensorsTensor*> kept;
    for (const auto& t : header->tensors)
        if (std::find(drop.begin(), drop.end(), t.name) == drop.end()) {
            entries.push_back({ t.name, t.dtype, t.shape });
            kept.push_back(&t);
        }
    if (entries.size() + drop.size() != header->tensors.size())
        qFatal("%s does not hold every tensor to drop", source.c_str());
    const Status written = writeSafetensorsFile(dir + "/model.safetensors", entries, header->metadata,
                                                [&](std::size_t i, std::uint8_t* dst, std::uint64_t n) {
                                                    std::memcpy(dst, bytes.data() + kept[i]->begin, n);
                                                    return Status::success();
                                                });
    if (!written)
        qFatal("%s", written.error().message.c_str());
    return dir;
}

} // namespace tessera::test
