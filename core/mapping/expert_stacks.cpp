// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/expert_stacks.h"

#include "model/tensor_reindex.h"

namespace tessera {

Result<TensorInfo> stackExpert(const TensorInfo& expert, std::int64_t index, std::int64_t count, const MappingRule& rule,
                               const std::string& name)
{
    if (index < 0 || index >= count)
        return makeError("is expert " + std::to_string(index) + ", past the " + std::to_string(count)
                         + " experts config.json gives");
    if (rule.transpose && expert.shape.size() != 2)
        return makeError("is " + std::to_string(expert.shape.size()) + "-D; only a 2-D expert weight can be transposed");
    if (rule.interleaveGateUp && (expert.shape.empty() || expert.shape[0] % 2 != 0))
        return makeError("needs an even number of rows ([gate; up]) to interleave; it has shape " + shapeToString(expert.shape));
    TensorInfo laid = expert;
    std::size_t pair = 0; // with interleave_gate_up: where the (row, gate-or-up) dims of the pair end up
    if (rule.interleaveGateUp)
        laid = pairHalves(laid); // [2n, …] → [n, 2, …]
    if (rule.transpose) {
        // Megatron's [out, in] as [in, out]; the paired rows move as one dim.
        laid = permuteDims(laid, rule.interleaveGateUp ? std::vector<std::size_t> { 2, 0, 1 } : std::vector<std::size_t> { 1, 0 });
        pair = rule.interleaveGateUp ? 1 : 0;
    }
    if (rule.interleaveGateUp) {
        // Saved with the pair as one dim of 2n: its row-major order is gate row 0, up row 0, gate row 1, …
        laid.savedShape = laid.shape;
        laid.savedShape[pair] *= 2;
        laid.savedShape.erase(laid.savedShape.begin() + static_cast<std::ptrdiff_t>(pair) + 1);
    }
    TensorInfo out = placeInStack(laid, index, count);
    out.name = name;
    return out;
}

std::string mappingTransformText(const MappingRule& rule)
{
    std::string text = mappingTransformName(rule.transform);
    if (rule.transpose || rule.interleaveGateUp)
        text += std::string(" (") + (rule.transpose ? "transposed" : "") + (rule.transpose && rule.interleaveGateUp ? ", " : "")
            + (rule.interleaveGateUp ? "gate/up interleaved" : "") + ")";
    return text;
}

std::optional<std::size_t> ExpertStacks::add(const std::string& target, std::int64_t expert, std::int64_t count, std::size_t row)
{
    Stack& stack = m_stacks[target];
    stack.count = count;
    auto [it, inserted] = stack.rows.emplace(expert, row);
    if (!inserted)
        return it->second;
    return std::nullopt;
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> ExpertStacks::incomplete() const
{
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
    for (const auto& [target, stack] : m_stacks) {
        std::vector<std::int64_t> missing;
        for (std::int64_t e = 0; e < stack.count; ++e)
            if (!stack.rows.count(e))
                missing.push_back(e);
        if (!missing.empty())
            out.emplace_back(target, std::move(missing));
    }
    return out;
}

} // namespace tessera
