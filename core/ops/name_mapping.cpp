// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/name_mapping.h"

#include "mapping/lora.h"
#include "merge/merge_plan.h"

#include <optional>
#include <sstream>

namespace tessera {

namespace {

/// Where a tensor of a LoRA checkpoint goes: a base weight to its Hugging Face name (fused or not), a factor into
/// the weight it updates and into the adapter file.
void describeLoraRow(MappingRow& row, const LoraCheckpoint& lora)
{
    for (const auto& m : lora.modules) {
        if (row.source != m.sourceA && row.source != m.sourceB)
            continue;
        const bool isA = row.source == m.sourceA;
        row.target = m.weight;
        row.transform = isA ? "lora_A (fused)" : "lora_B (fused)";
        std::ostringstream scale;
        scale << m.scale;
        row.detail = "fused into " + m.weight + " as W + (B·A)·" + scale.str() + " (r = " + std::to_string(m.rank)
            + "); also written to lora_adapter/ as " + (isA ? m.adapterA : m.adapterB);
        return;
    }
    auto it = lora.baseNames.find(row.source);
    if (it == lora.baseNames.end())
        return;
    if (it->second.empty()) {
        row.transform = "dropped";
        row.detail = "the frozen original of a module trained in full (modules_to_save): its trained copy is written";
        return;
    }
    row.target = it->second;
    for (const auto& m : lora.modules)
        if (m.weight == it->second) {
            row.transform = "copy + LoRA";
            row.detail = "the base weight; the merge adds its LoRA update";
            return;
        }
}

MappingResult identityMapping(const CheckpointInfo& checkpoint, const MappingOptions& options)
{
    MappingResult result;
    result.configPath = options.configDir.empty() ? checkpoint.hfConfigDir : options.configDir;
    result.rows.reserve(checkpoint.tensors.size());
    // A LoRA checkpoint's names are PEFT's: each row says where its tensor goes in the fused model and adapter.
    std::optional<LoraCheckpoint> lora;
    std::string loraError;
    if (hasLoraTensors(checkpoint)) {
        auto read = readLoraCheckpoint(checkpoint, {});
        if (read)
            lora = std::move(*read);
        else
            loraError = read.error().message;
    }
    for (const auto& t : checkpoint.tensors) {
        MappingRow row;
        row.source = t.name;
        row.target = t.name;
        row.transform = "copy";
        row.sourceShape = t.shape;
        row.targetShape = t.shape;
        if (lora) {
            describeLoraRow(row, *lora);
        } else if (!loraError.empty() && isPeftTensorName(t.name)) {
            row.status = MappingStatus::Unexpected;
            row.detail = "a LoRA tensor that cannot be merged: " + loraError;
        }
        result.rows.push_back(std::move(row));
    }
    // The plan knows which head a tied model drops; it refuses checkpoints with problems, and then nothing is tied.
    MergeOptions merge;
    merge.hfConfigDir = options.configDir;
    merge.forceTieWordEmbeddings = options.tieWordEmbeddings;
    if (auto plan = planMerge(checkpoint, merge)) {
        result.tiedEmbeddings = !plan->tieChecks.empty();
        for (const auto& tie : plan->tieChecks) {
            auto& row = result.rows[tie.dropped];
            row.status = MappingStatus::Tied;
            row.detail = "tied to " + checkpoint.tensors[tie.kept].name
                + ": not written; the merge checks that it equals the embedding";
        }
    }
    return result;
}

} // namespace

Result<MappingResult> nameMapping(const CheckpointInfo& checkpoint, const MappingOptions& options)
{
    if (isMegatronLayout(checkpoint.layout))
        return mapMegatronToHf(checkpoint, options);
    return identityMapping(checkpoint, options);
}

} // namespace tessera
