// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The table of what becomes of every tensor's name in a merge, for any layout: what the workbench's Mapping view
// lists and `--debug` logs.

#include "mapping/megatron_mapping.h"
#include "model/checkpoint.h"
#include "result.h"

namespace tessera {

/// Megatron layouts: mapMegatronToHf(). Other layouts already carry Hugging Face names, each written as it is: one
/// row per tensor, a LoRA checkpoint's factors and base weights saying where they go (fused, adapter), a tied head
/// the merge drops flagged Tied. For those `mapped` is left empty: the merge reads `checkpoint` itself.
Result<MappingResult> nameMapping(const CheckpointInfo& checkpoint, const MappingOptions& options);

} // namespace tessera
