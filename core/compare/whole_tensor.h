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

/// As readWholeTensor() in its own dtype, into `buffer` when it is large enough (a buffer read into before: its pages
/// are mapped already, so a reader of many tensors in turn takes no page faults for them), else into fresh memory
/// that replaces it. Elements no piece holds keep what `buffer` held: callers must leave out a tensor with gaps.
Status readWholeTensorInto(SourceFiles& files, const CheckpointInfo& info, int index,
                           const std::function<bool()>& canceled, PageBuffer& buffer);

} // namespace tessera
