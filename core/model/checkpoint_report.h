// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace tessera {

/// "primary", "replica", "partial", as reports and logs name a piece's role.
const char* pieceRoleName(PieceRole role);
/// The `tessera inspect --json` object: format, parallel, tensors (name, dtype, shape, pieces), problems.
nlohmann::json checkpointToJson(const CheckpointInfo& info);
/// A readable multi-line summary: layout, parallel configuration, tensor count and bytes, problems.
std::string checkpointSummary(const CheckpointInfo& info, bool listTensors = false);
/// safetensors code when there is one ("BF16"), else torch's name.
std::string dtypeLabel(DType dtype);

} // namespace tessera
