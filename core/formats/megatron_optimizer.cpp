// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/megatron_optimizer.h"

#include "formats/optimizer_keys.h"
#include "io/printable.h"

#include <algorithm>

#include <set>

namespace tessera {

namespace {

using K = PyValue::Kind;
using Layout = OptimizerState::Layout;

constexpr char kReadable[] = "fully_reshardable";

/// What each sharding type Megatron-core writes is, for the refusal that names it.
std::string describeSharding(const std::string& type)
{
    if (type == "dp_reshardable")
        return "flat per-bucket buffers laid out by the run's data-parallel gradient buckets (Megatron's default)";
    if (type == "fully_sharded_model_space")
        return "deprecated: flattened fragments of each parameter";
    if (type == "dp_zero_gather_scatter")
        return "deprecated: one pickled object per model-parallel rank";
    if (type == "fully_sharded_bucket_space")
        return "deprecated: per-bucket buffers";
    if (type == "fsdp_dtensor")
        return "Megatron-FSDP's DTensor state";
    return "not a sharding type Tessera knows";
}

/// The string `key` of a dict, "" when absent or not a string.
std::string textAt(const PyRef& dict, const char* key)
{
    std::string out;
    if (dict && dict->kind == K::Dict)
        toString(dict->get(key), out);
    return out;
}

std::string pyKeyText(const PyRef& key)
{
    std::string s;
    std::int64_t i = 0;
    if (toString(key, s))
        return s;
    if (toInt(key, i))
        return std::to_string(i);
    return "?";
}

} // namespace

void separateMegatronOptimizer(CheckpointInfo& info)
{
    moveOptimizerTensors(info, Layout::MegatronCanonical, megatronCanonicalOptimizerKey);
    const bool canonical = info.optimizer.layout == Layout::MegatronCanonical;
    moveOptimizerTensors(info, Layout::MegatronFlatBuffers, megatronFlatOptimizerKey);
    if (canonical) // both kinds of key: the canonical ones are the state that can be read
        info.optimizer.layout = Layout::MegatronCanonical;
}

void readMegatronOptimizerSharding(const PyRef& root, OptimizerState& optimizer)
{
    if (!root || root->kind != K::Dict)
        return;
    const PyRef entry = root->get("optimizer");
    if (const std::string type = textAt(entry, "param_state_sharding_type"); !type.empty()) {
        optimizer.shardingType = type;
        optimizer.shardingSource = "common.pt: optimizer.param_state_sharding_type";
        return;
    }
    // A ChainedOptimizer of several (dense and expert) saves one state dict per optimizer, keyed by its index.
    std::set<std::string> types;
    std::string where;
    if (entry && entry->kind == K::Dict)
        for (const auto& [key, value] : entry->entries)
            if (const std::string type = textAt(value, "param_state_sharding_type"); !type.empty()) {
                types.insert(type);
                where += (where.empty() ? "" : ", ") + std::string("optimizer[") + printableText(pyKeyText(key))
                    + "]";
            }
    if (!types.empty()) {
        for (const auto& t : types)
            optimizer.shardingType += (optimizer.shardingType.empty() ? "" : ", ") + t;
        optimizer.shardingSource = "common.pt: " + where + ".param_state_sharding_type";
        return;
    }
    if (const std::string type = textAt(root->get("content_metadata"), "distrib_optim_sharding_type"); !type.empty()) {
        optimizer.shardingType = type;
        optimizer.shardingSource = "common.pt: content_metadata.distrib_optim_sharding_type";
    }
}

std::string megatronMasterWeightKey(const std::string& name)
{
    const auto key = megatronCanonicalOptimizerKey(name);
    return key && key->kind == "fp32_param" ? key->param : std::string();
}

std::string megatronMasterWeightsRefusal(const CheckpointInfo& info, const std::vector<std::string>& modelKeys)
{
    const OptimizerState& o = info.optimizer;
    // Each chained optimizer records its own type; any but the readable one stops the read.
    std::string type = o.shardingType;
    for (std::size_t start = 0; start < type.size();) {
        const std::size_t end = std::min(type.find(", ", start), type.size());
        const std::string one = type.substr(start, end - start);
        if (one != kReadable)
            return "the distributed optimizer's state is '" + printableText(one) + "' (" + o.shardingSource
                + "): " + describeSharding(one) + ". Only its '" + kReadable + "' state (optimizer.state.fp32_param."
                "<key>, shaped like each weight) can be read back into the model; Megatron-LM writes it with "
                "--dist-ckpt-optim-fully-reshardable";
        start = end + 2;
    }
    if (o.layout == Layout::MegatronFlatBuffers) // flat buffers, their type not recorded (no common.pt)
        return std::string("the optimizer state is the distributed optimizer's flat per-bucket buffers "
                           "(optimizer.distributed.*; no sharding type is recorded), not canonical state: only "
                           "optimizer.state.fp32_param.<key>, shaped like each weight, can be read back into the "
                           "model; Megatron-LM writes it with --dist-ckpt-optim-fully-reshardable");
    if (o.layout != Layout::MegatronCanonical)
        return "the checkpoint holds no optimizer state, so no fp32 master weights to merge";
    std::set<std::string> master, wanted(modelKeys.begin(), modelKeys.end());
    for (const auto& t : o.tensors) {
        const auto key = megatronCanonicalOptimizerKey(t.name);
        if (key && key->kind == "fp32_param")
            master.insert(key->param);
        else if (key)
            wanted.insert(key->param);
    }
    std::vector<std::string> missing;
    for (const auto& k : wanted)
        if (!master.count(k))
            missing.push_back(k);
    if (missing.empty())
        return "";
    std::string listed;
    for (std::size_t i = 0; i < missing.size() && i < 5; ++i)
        listed += (i ? ", " : "") + printableText(missing[i]);
    if (missing.size() > 5)
        listed += " and " + std::to_string(missing.size() - 5) + " more";
    return "the optimizer keeps no fp32 master weights (optimizer.state.fp32_param.<key>) for "
        + std::to_string(missing.size()) + " of its parameters: " + listed
        + (master.empty() ? " (an optimizer without master weights: the model keys are the weights)" : "");
}

} // namespace tessera
