// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/module_order.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

namespace tessera {

namespace {

/// Where a known module or parameter name comes among its siblings in transformers' decoder models.
int knownRank(const std::string& part)
{
    static const std::map<std::string, int> ranks {
        { "model", 0 }, { "lm_head", 1 }, { "score", 1 }, { "v_head", 1 },
        { "embed_tokens", 0 }, { "layers", 1 }, { "norm", 2 },
        { "self_attn", 0 }, { "mlp", 1 }, { "input_layernorm", 2 }, { "post_attention_layernorm", 3 },
        { "q_proj", 0 }, { "k_proj", 1 }, { "v_proj", 2 }, { "o_proj", 3 }, { "q_norm", 4 }, { "k_norm", 5 },
        { "gate", 0 }, { "gate_proj", 1 }, { "up_proj", 2 }, { "down_proj", 3 }, { "experts", 4 },
        { "shared_expert", 5 }, { "shared_expert_gate", 6 },
        { "weight", 0 }, { "bias", 1 },
    };
    auto it = ranks.find(part);
    return it == ranks.end() ? 1000 : it->second;
}

struct Part {
    bool number = false;
    std::uint64_t value = 0;
    int rank = 0;
    std::string text;
    bool operator<(const Part& o) const
    {
        if (number != o.number)
            return number; // a layer or expert number before a named sibling
        if (number)
            return value < o.value;
        if (rank != o.rank)
            return rank < o.rank;
        return text < o.text;
    }
};

std::vector<Part> partsOf(const std::string& name)
{
    std::vector<Part> parts;
    std::size_t start = 0;
    while (start <= name.size()) {
        const std::size_t end = std::min(name.find('.', start), name.size());
        Part p;
        p.text = name.substr(start, end - start);
        p.number = !p.text.empty() && p.text.size() < 19
            && std::all_of(p.text.begin(), p.text.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (p.number)
            p.value = std::stoull(p.text);
        else
            p.rank = knownRank(p.text);
        parts.push_back(std::move(p));
        start = end + 1;
    }
    return parts;
}

} // namespace

std::vector<std::size_t> moduleOrder(const std::vector<std::string>& names)
{
    std::vector<std::vector<Part>> keys;
    keys.reserve(names.size());
    for (const auto& n : names)
        keys.push_back(partsOf(n));
    std::vector<std::size_t> order(names.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return std::lexicographical_compare(keys[a].begin(), keys[a].end(), keys[b].begin(), keys[b].end());
    });
    return order;
}

} // namespace tessera
