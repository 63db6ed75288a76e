// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What a job's output is made of, as one hash: the identity that names a set of parts (`merge --part K/N`,
// `split --part K/N`), so that only processes that would write the same bytes ever combine their shares. Computed
// here, once, for merges, GGUF exports and splits alike (merge_parts.cpp, split_parts.cpp): a split writes the
// model a merge plan describes, so the model's identity is the merge plan's, and the split adds its own layout.

#include "formats/config_folder.h"
#include "io/fnv_hash.h"
#include "merge/merge_plan.h"
#include "model/checkpoint.h"

#include <string>

namespace tessera {

/// Adds everything that decides the output of `plan` over `info`: every source file it reads (the checkpoint's
/// pieces, a LoRA update's factor files, a base model's files, MXFP4 scale files, the tensors a tie check
/// compares) by its path below the checkpoint, size and modification time; each tensor's name, source, dtype, copy
/// mode, place and LoRA scale; each output file's name, size and header; the index; the side files (names, sizes,
/// times); the config edits (dtype, tie, dequantized); the generated files' names and contents.
void addOutputIdentity(FnvHash& fnv, const MergePlan& plan, const CheckpointInfo& info);

/// Adds a config folder's side files: each listed name with its size and modification time, so a tokenizer or
/// config edited between two parts gives another identity. Not the folder's path (a mount point may differ
/// between nodes).
void addConfigFolderIdentity(FnvHash& fnv, const ConfigFolder& config);

/// Adds one file by `name` (as the job names it: a path below the checkpoint, the same on every node), with the
/// size and modification time `path` has now; a missing file adds zeros.
void addFileIdentity(FnvHash& fnv, const std::string& name, const std::string& path);

} // namespace tessera
