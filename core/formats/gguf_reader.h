// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"
#include "result.h"

#include <string>

namespace tessera {

/// Reads a GGUF file (llama.cpp's format) as a checkpoint under Hugging Face names, so it can be inspected and
/// compared with the model it was exported from: llama.cpp's names mapped back (blk.N.attn_q → model.layers.N.
/// self_attn.q_proj…), stacked experts split into one tensor per expert, and for the `llama` architecture the
/// rotary row permutation undone, all as re-indexed boxes of the file. Each ggml type is read as its row of the
/// table of types (gguf_types.h) says: the plain ones (F32, F16, BF16) as they are, the quantized ones (Q8_0) as
/// float32 (pieces of their blocks, dequantized as they are read, as llama.cpp does); tensors of other types are
/// named in `notes` ("gguf.unread_tensors") and not read.
/// The metadata goes into `notes` ("gguf.general.architecture" → "llama", "tokenizer" → a summary).
Result<CheckpointInfo> scanGgufFile(const std::string& path);

} // namespace tessera
