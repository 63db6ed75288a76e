// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "merge/merge_engine.h"
#include "merge/source_files.h"
#include "model/checkpoint.h"
#include "result.h"

#include <functional>
#include <optional>

namespace tessera {

/// Reads tensor `index` of `info` whole into fresh anonymous memory, assembled from its pieces as a merge assembles
/// it: in `dtype` as a merge converts (nullopt: its own dtype), a LoRA weight as its fused value W + (B·A)·scale.
/// What `diff`, the Statistics window and `drift` read a tensor with.
Result<PageBuffer> readWholeTensor(SourceFiles& files, const CheckpointInfo& info, int index,
                                   const std::function<bool()>& canceled, std::optional<DType> dtype = std::nullopt);

} // namespace tessera
