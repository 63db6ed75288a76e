// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What a Hugging Face model must contain, from its config.json and a family's rules: every parameter name and
// shape. Sizes come only from config.json (or a rule's documented default for a key the file omits), never
// from the checkpoint, so the checkpoint can be checked against them.

#include "model/checkpoint.h"
#include "mapping/megatron_mapping_rules.h"
#include "result.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera {

/// The integer facts of a config.json.
struct HfModelConfig {
    std::string path;                            ///< the config.json read
    std::vector<std::string> architectures;
    std::string modelType;
    std::map<std::string, std::int64_t> values;  ///< top-level integer and boolean (0/1) keys
};

/// Reads `configDir/config.json`. Errors name the file and say how to point at another folder.
Result<HfModelConfig> readHfModelConfig(const std::string& configDir);

/// Named integers an expression can use.
using ConfigVars = std::map<std::string, std::int64_t>;

/// Evaluates integer arithmetic and conditions: numbers, names, ( ), + - * / %, == != < <= > >=, ! && ||.
/// Errors name an unknown variable or the syntax problem.
Result<std::int64_t> evaluateExpression(const std::string& expression, const ConfigVars& vars);

/// The config's values, then the rules' defaults for keys the config lacks, then `overrides` (which win).
Result<ConfigVars> resolveConfigVars(const HfModelConfig& config, const MappingRuleSet& rules, const ConfigVars& overrides);

/// One parameter of the Hugging Face model.
struct ExpectedParameter {
    std::string name;
    Shape shape;
    std::string templateId; ///< the "expected" entry it comes from
    std::string shapeText;  ///< the shape's expressions, for messages ("[vocab_size, hidden_size]")
};

/// Every parameter the rules expect under `vars`, in Hugging Face's module order (layers expanded in place).
Result<std::vector<ExpectedParameter>> expectedHfParameters(const MappingRuleSet& rules, const ConfigVars& vars);

} // namespace tessera
