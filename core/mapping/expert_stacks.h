// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A Hugging Face tensor holding every expert of a layer (GPT-OSS's mlp.experts.gate_up_proj [E, H, 2I]) is filled
// one Megatron expert tensor at a time (stack_experts): each lays its boxes in its own entry of the leading expert
// axis. This is how one expert's tensor is laid there, and the count of which entries the sources filled, so that
// an expert rank that is not there is named rather than written as a hole.

#include "mapping/megatron_mapping_rules.h"
#include "model/checkpoint.h"
#include "result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// `expert` (one expert's Megatron tensor) as entry `index` of a tensor of `count` experts named `name`, laid out
/// as `rule` says (transpose, interleave_gate_up). Only boxes move; an interleaved tensor is boxed as [.., n, 2]
/// and saved as [.., 2n]. The error says why the tensor cannot be laid out so.
Result<TensorInfo> stackExpert(const TensorInfo& expert, std::int64_t index, std::int64_t count, const MappingRule& rule,
                               const std::string& name);

/// "stack_experts (transposed, gate/up interleaved)": a rule's transform as the mapping table shows it.
std::string mappingTransformText(const MappingRule& rule);

/// Which entries of which stacked targets the mapping has filled, and from which row of its table.
class ExpertStacks {
public:
    /// Records entry `expert` of `target` (`count` entries in all), filled on row `row`. Returns the row that
    /// filled it already, if one did.
    std::optional<std::size_t> add(const std::string& target, std::int64_t expert, std::int64_t count, std::size_t row);
    bool contains(const std::string& target) const { return m_stacks.count(target) > 0; }
    /// Every target some entries of which no source filled, with those entries.
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> incomplete() const;

private:
    struct Stack {
        std::int64_t count = 0;
        std::map<std::int64_t, std::size_t> rows; ///< entry → row
    };
    std::map<std::string, Stack> m_stacks;
};

} // namespace tessera
