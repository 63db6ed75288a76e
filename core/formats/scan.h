// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "progress.h"
#include "result.h"

#include <string>

namespace tessera {

/// What to scan and how.
struct ScanOptions {
    std::string hfModelPath; ///< config/tokenizer folder given by the user (--hf_model_path); found automatically when empty
    int threads = 0;         ///< parallel file readers; 0 = one per core
};

/// Detects the layout of `path` and reads every header and pickle (never tensor data) into a CheckpointInfo.
///
/// `path` may be a run root with latest_checkpointed_iteration.txt, a global_step_N or iter_N folder, an actor/
/// or critic/ folder, a DCP folder, a Megatron folder, a Hugging Face folder or a single .safetensors/.pt file.
/// Damage in individual files becomes Problems; an Error is returned only when nothing sensible can be read.
/// Progress counts files.
Result<CheckpointInfo> scanCheckpoint(const std::string& path, const ScanOptions& options = {},
                                      Progress& progress = silentProgress());

} // namespace tessera
