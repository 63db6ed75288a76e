// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The mapping table for people and scripts: `tessera inspect` prints it after the checkpoint summary and adds
// it to --json as "mapping".

#include "mapping/megatron_mapping.h"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace tessera {

/// {"family", "rules", "config", "value_model", "tied_embeddings", "counts": {status: n}, "rows": [{source,
/// target, rule, rule_file, transform, source_shape, target_shape, expected_shape, status, detail}], "problems",
/// "warnings"}.
nlohmann::json mappingToJson(const MappingResult& result);

/// A readable table: one line per row (only the rows that are not ok unless `allRows`), then the counts.
std::string mappingSummary(const MappingResult& result, bool allRows);

} // namespace tessera
