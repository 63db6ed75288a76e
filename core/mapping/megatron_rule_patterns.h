// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A mapping rule's name patterns (`decoder.layers.{layer}.mlp.linear_fc1.weight`) compiled to regexes, and the
// rules compiled against one config.json: what the Megatron mapping matches names with. Internal to
// megatron_mapping.cpp and megatron_transforms.cpp, hence its own namespace.

#include "io/regex.h"
#include "mapping/hf_expected.h"
#include "mapping/megatron_mapping_rules.h"
#include "result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::mapping_internal {

/// A pattern such as `decoder.layers.{layer}.mlp.linear_fc1.weight` compiled to a regex.
struct Pattern {
    std::string text;
    Regex regex;
    std::vector<std::string> names; ///< placeholder per capture group
};

using Captures = std::map<std::string, std::string>;

/// `text` compiled; {layer}, {expert} and {block} match digits, {param} a name. `where` names the rule in errors.
Result<Pattern> compilePattern(const std::string& text, const std::string& where);

/// What `p` captured from `name`, or nothing when `name` does not match it.
std::optional<Captures> matchPattern(const Pattern& p, const std::string& name);

/// `text` with each {placeholder} replaced by what it captured.
std::string render(std::string text, const Captures& captures);

struct CompiledRule {
    const MappingRule* rule;
    std::vector<Pattern> megatron;
    std::vector<Pattern> hf; ///< the targets as patterns, to say which source a missing parameter needs
    std::int64_t layerOffset = 0; ///< added to {layer} between the Megatron name and the target
    std::int64_t experts = 0;     ///< stack_experts: the entries of the target's expert axis
};

/// `captures` with its {layer} moved by `offset` (a multi-token-prediction layer's number after the decoder's).
Captures offsetLayer(Captures captures, std::int64_t offset);

/// The rules whose `when` holds under `vars`, compiled; `ranges` gives stack_experts its number of experts.
Result<std::vector<CompiledRule>> compileRules(const std::vector<MappingRule>& rules, const ConfigVars& vars,
                                               const std::map<std::string, std::string>& ranges = {});

} // namespace tessera::mapping_internal
