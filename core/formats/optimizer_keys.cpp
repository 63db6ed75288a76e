// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/optimizer_keys.h"

#include "io/regex.h"

#include <set>

namespace tessera {

std::optional<OptimizerKey> megatronCanonicalOptimizerKey(const std::string& name)
{
    static const Regex canonical = Regex::fixed(R"((?:chained_\d+\.)?optimizer\.state\.([A-Za-z0-9_]+)\.(.+))");
    std::vector<std::string> groups;
    if (!canonical.fullMatch(name, groups))
        return std::nullopt;
    return OptimizerKey { groups[0], groups[1] };
}

std::optional<OptimizerKey> megatronFlatOptimizerKey(const std::string& name)
{
    static const Regex flat = Regex::fixed(R"((?:chained_\d+\.)?optimizer\.distributed\..*\.([A-Za-z0-9_]+))");
    std::vector<std::string> groups;
    if (!flat.fullMatch(name, groups))
        return std::nullopt;
    return OptimizerKey { groups[0], "" };
}

std::optional<OptimizerKey> torchFlattenedOptimizerKey(const std::string& name)
{
    static const Regex flattened = Regex::fixed(R"(optimizer\.state\.(.+)\.([A-Za-z0-9_]+))");
    std::vector<std::string> groups;
    if (!flattened.fullMatch(name, groups))
        return std::nullopt;
    return OptimizerKey { groups[1], groups[0] };
}

std::string torchtitanStateEntry(const std::string& name)
{
    for (const char* entry : { "optimizer", "lr_scheduler", "dataloader", "train_state" }) {
        const std::string prefix = std::string(entry) + ".";
        if (name.rfind(prefix, 0) == 0)
            return entry;
    }
    return "";
}

std::size_t moveOptimizerTensors(CheckpointInfo& info, OptimizerState::Layout layout, OptimizerKeyReader keyOf)
{
    OptimizerState& optimizer = info.optimizer;
    std::set<std::string> moved, params;
    std::vector<TensorInfo> kept;
    for (auto& t : info.tensors) {
        const auto key = keyOf(t.name);
        if (!key) {
            kept.push_back(std::move(t));
            continue;
        }
        moved.insert(t.name);
        ++optimizer.kinds[key->kind];
        if (!key->param.empty())
            params.insert(key->param);
        optimizer.tensors.push_back(std::move(t));
    }
    info.tensors = std::move(kept);
    std::vector<Problem> problems;
    for (auto& p : info.problems)
        (moved.count(p.tensor) ? optimizer.problems : problems).push_back(std::move(p));
    info.problems = std::move(problems);
    if (!moved.empty()) {
        optimizer.layout = layout;
        optimizer.parameters += params.size();
    }
    return moved.size();
}

} // namespace tessera
