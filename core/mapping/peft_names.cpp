// SPDX-License-Identifier: GPL-3.0-or-later
#include "mapping/peft_names.h"

#include <utility>

namespace tessera {

namespace {

/// "default.weight" → adapter "default"; "weight" → none. False for anything else (a bias, a nested name).
bool splitAdapterAndWeight(const std::string& rest, std::string& adapter)
{
    if (rest == "weight") {
        adapter.clear();
        return true;
    }
    const auto dot = rest.find('.');
    if (dot == std::string::npos || dot == 0 || rest.substr(dot + 1) != "weight")
        return false;
    adapter = rest.substr(0, dot);
    return true;
}

} // namespace

PeftName parsePeftName(const std::string& key)
{
    PeftName n;
    std::string name = key.rfind(kPeftPrefix, 0) == 0 ? key.substr(std::string(kPeftPrefix).size()) : key;
    auto splitAt = [&](const std::string& marker, std::string& before, std::string& after) {
        const auto at = name.find(marker);
        if (at == std::string::npos)
            return false;
        before = name.substr(0, at);
        after = name.substr(at + marker.size());
        return true;
    };
    std::string before, after;
    if (name.find(".lora_magnitude_vector") != std::string::npos) {
        n.kind = PeftName::Kind::Unsupported;
        n.module = name;
        n.param = "a DoRA magnitude vector (DoRA adapters are not supported)";
        return n;
    }
    for (const auto& [marker, kind] : { std::pair { ".lora_A.", PeftName::Kind::LoraA },
                                        std::pair { ".lora_B.", PeftName::Kind::LoraB } })
        if (splitAt(marker, before, after)) {
            n.module = before;
            n.param = "weight";
            n.kind = splitAdapterAndWeight(after, n.adapter) ? kind : PeftName::Kind::Unsupported;
            if (n.kind == PeftName::Kind::Unsupported)
                n.param = "a LoRA factor '" + after + "' (LoRA biases are not supported)";
            return n;
        }
    for (const auto& [marker, kind] : { std::pair { ".lora_embedding_A", PeftName::Kind::EmbeddingA },
                                        std::pair { ".lora_embedding_B", PeftName::Kind::EmbeddingB } })
        if (splitAt(marker, before, after)) {
            n.module = before;
            n.param = "weight";
            n.kind = kind;
            if (!after.empty() && (after[0] != '.' || after.find('.', 1) != std::string::npos))
                n.kind = PeftName::Kind::Unsupported;
            else if (!after.empty())
                n.adapter = after.substr(1);
            return n;
        }
    if (splitAt(".base_layer.", before, after)) {
        n.kind = PeftName::Kind::Base;
        n.module = before;
        n.param = after;
        return n;
    }
    if (splitAt(".modules_to_save.", before, after)) {
        const auto dot = after.find('.');
        n.kind = dot == std::string::npos ? PeftName::Kind::Unsupported : PeftName::Kind::SavedCopy;
        n.module = before;
        n.adapter = after.substr(0, dot);
        n.param = dot == std::string::npos ? after : after.substr(dot + 1);
        return n;
    }
    if (splitAt(".original_module.", before, after)) {
        n.kind = PeftName::Kind::OriginalCopy;
        n.module = before;
        n.param = after;
        return n;
    }
    const auto dot = name.rfind('.');
    n.module = dot == std::string::npos ? "" : name.substr(0, dot);
    n.param = dot == std::string::npos ? name : name.substr(dot + 1);
    return n;
}

bool isLoraFactor(PeftName::Kind k)
{
    return k == PeftName::Kind::LoraA || k == PeftName::Kind::LoraB || k == PeftName::Kind::EmbeddingA
        || k == PeftName::Kind::EmbeddingB;
}

} // namespace tessera
