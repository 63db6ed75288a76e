// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "result.h"

#include <string>

namespace tessera {

/// Reads a GGUF file (llama.cpp's format) as a checkpoint under Hugging Face names, so it can be inspected and
/// compared with the model it was exported from: llama.cpp's names mapped back (blk.N.attn_q → model.layers.N.
/// self_attn.q_proj…), stacked experts split into one tensor per expert, and for the `llama` architecture the
/// rotary row permutation undone, all as re-indexed boxes of the file. F32, F16 and BF16 tensors are read as
/// they are, Q8_0 tensors as float32 (Q8_0 pieces, dequantized as they are read, as llama.cpp does); tensors of
/// other types are named in `notes` ("gguf.unread_tensors") and not read.
/// The metadata goes into `notes` ("gguf.general.architecture" → "llama", "tokenizer" → a summary).
Result<CheckpointInfo> scanGgufFile(const std::string& path);

} // namespace tessera
