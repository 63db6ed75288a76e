// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Before any tensor: are A and B the same model? Their config.json files compared on what defines one.

#include <string>
#include <vector>

namespace tessera {

/// One defining setting on which two config.json files disagree.
struct ConfigDifference {
    std::string key;   ///< "hidden_size"
    std::string a;     ///< its value in A, as JSON ("64", "[\"LlamaForCausalLM\"]")
    std::string b;
};

/// Compares the config.json of the folders `dirA` and `dirB` on the settings that make a model what it is
/// (architectures, model_type, hidden, intermediate and head sizes, layers, heads, vocabulary, experts, tied
/// embeddings), looking inside text_config for multimodal models. Only settings both files have are compared;
/// an absent or unreadable config.json gives no difference (the tensors still tell).
std::vector<ConfigDifference> compareModelConfigs(const std::string& dirA, const std::string& dirB);

/// "A and B are different models: hidden_size 64 in A, 128 in B; vocab_size …", empty when there is no difference.
std::string describeConfigDifferences(const std::vector<ConfigDifference>& differences);

} // namespace tessera
