// SPDX-License-Identifier: GPL-3.0-or-later
#include "merge/lora_plan.h"

namespace tessera {

const char* loraOutputName(LoraOutput output)
{
    switch (output) {
    case LoraOutput::Fused:
        return "fused";
    case LoraOutput::Adapter:
        return "adapter";
    case LoraOutput::Both:
        return "both";
    }
    return "?";
}

Result<LoraOutput> loraOutputFromName(const std::string& name)
{
    for (auto output : { LoraOutput::Fused, LoraOutput::Adapter, LoraOutput::Both })
        if (name == loraOutputName(output))
            return output;
    return makeError("--lora must be fused, adapter or both (got '" + name + "')");
}

std::vector<MergeOutput> LoraMergePlans::outputs(const LoraCheckpoint& lora) const
{
    std::vector<MergeOutput> list;
    if (fused)
        list.push_back({ &lora.fused, &*fused, "" });
    if (adapter)
        list.push_back({ &lora.adapter, &*adapter, adapterFolder });
    return list;
}

Result<LoraMergePlans> planLoraMerge(const LoraCheckpoint& lora, const MergeOptions& options, LoraOutput what)
{
    LoraMergePlans plans;
    plans.notes = lora.notes;
    if (what != LoraOutput::Adapter) {
        if (!lora.hasBase && what == LoraOutput::Fused)
            return makeError(lora.adapter.root + ": the checkpoint holds only the LoRA adapter (save_lora_only), so "
                                                 "the fused model needs the base weights: pass --base_model with the "
                                                 "base model's Hugging Face folder");
        if (lora.hasBase) {
            auto plan = planMerge(lora.fused, options);
            if (!plan)
                return plan.error();
            plans.fused = std::move(*plan);
        }
    }
    if (what != LoraOutput::Fused) {
        MergeOptions adapter;
        adapter.keepPeftNames = true;
        adapter.expectConfig = false;
        adapter.singleFileName = kAdapterWeightsFile;
        adapter.threads = options.threads;
        adapter.generatedFiles = { { kAdapterConfigFile, lora.adapterConfigJson() } };
        auto plan = planMerge(lora.adapter, adapter);
        if (!plan)
            return plan.error().withContext("the LoRA adapter");
        plans.adapter = std::move(*plan);
    }
    return plans;
}

} // namespace tessera
