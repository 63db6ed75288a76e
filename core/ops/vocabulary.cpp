// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/vocabulary.h"

#include <algorithm>

namespace tessera {

namespace {

/// Words joined for a sentence: "a, b or c".
std::string listed(const std::vector<std::string>& words)
{
    std::string text;
    for (std::size_t i = 0; i < words.size(); ++i)
        text += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
    return text;
}

} // namespace

const std::vector<BackendEntry>& backends()
{
    // verl's --backend fsdp also reads a single torch.save state dict; megatron every Megatron layout.
    static const std::vector<BackendEntry> table {
        { "auto", std::nullopt },
        { "fsdp", LayoutFamily::TorchSave },
        { "dcp", LayoutFamily::Dcp },
        { "megatron", LayoutFamily::Megatron },
    };
    return table;
}

bool isBackendName(const std::string& name)
{
    const auto& all = backends();
    return std::any_of(all.begin(), all.end(), [&](const BackendEntry& b) { return b.name == name; });
}

bool backendReads(const std::string& backend, const std::string& layout)
{
    for (const auto& b : backends())
        if (b.name == backend)
            return !b.family || *b.family == layoutFamily(layout);
    return false;
}

std::string backendForLayout(const std::string& layout)
{
    for (const auto& b : backends())
        if (b.family && *b.family == layoutFamily(layout))
            return b.name;
    return "auto";
}

std::string backendNameList()
{
    std::vector<std::string> names;
    for (const auto& b : backends())
        names.push_back(b.name);
    return listed(names);
}

const std::vector<DtypeEntry>& outputDtypes()
{
    static const std::vector<DtypeEntry> table {
        { "bf16", DType::BFloat16 },
        { "fp16", DType::Float16 },
        { "fp32", DType::Float32 },
    };
    return table;
}

std::string outputDtypeList()
{
    std::vector<std::string> names;
    for (const auto& d : outputDtypes())
        names.push_back(d.name);
    return listed(names);
}

Result<std::optional<DType>> outputDtypeValue(const std::optional<std::string>& name)
{
    if (!name)
        return std::optional<DType>();
    const auto dtype = dtypeFromUserName(*name);
    if (!dtype)
        return makeError("--dtype must be " + outputDtypeList() + " (got '" + *name + "')");
    return std::optional<DType>(dtype);
}

const std::vector<LoraOutput>& loraOutputs()
{
    static const std::vector<LoraOutput> modes { LoraOutput::Both, LoraOutput::Fused, LoraOutput::Adapter };
    return modes;
}

const std::vector<WeightsSourceEntry>& weightsSources()
{
    static const std::vector<WeightsSourceEntry> sources { { "model", WeightsSource::Model },
                                                           { "optimizer", WeightsSource::Optimizer } };
    return sources;
}

std::string weightsSourceList()
{
    std::string out;
    const auto& all = weightsSources();
    for (std::size_t i = 0; i < all.size(); ++i)
        out += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i].name;
    return out;
}

Result<WeightsSource> weightsSourceValue(const std::optional<std::string>& name)
{
    if (!name)
        return weightsSources().front().source;
    for (const auto& entry : weightsSources())
        if (entry.name == *name)
            return entry.source;
    return makeError("--weights_from must be " + weightsSourceList() + " (got '" + *name + "')");
}

const std::vector<SplitFormat>& splitFormats()
{
    static const std::vector<SplitFormat> formats { SplitFormat::Fsdp, SplitFormat::Dcp, SplitFormat::Megatron,
                                                    SplitFormat::MegatronDist };
    return formats;
}

} // namespace tessera
