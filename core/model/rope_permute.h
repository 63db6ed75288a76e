// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// llama.cpp's `llama` architecture applies rotary embeddings to interleaved pairs (x0, x1), (x2, x3)… of each
// head, Hugging Face's to the two halves (x_i, x_{i+d/2}). convert_hf_to_gguf therefore reorders the rows of
// q_proj and k_proj per head: HF row h·d + j·d/2 + i becomes row h·d + 2i + j. Here that is a re-indexing of the
// stored boxes (no value is touched or copied): the result is a tensor whose row-major order is the permuted one.

#include "model/checkpoint.h"
#include "result.h"

namespace tessera {

/// `tensor` (rows = heads × headDim, any trailing dims) with its rows in llama.cpp's interleaved order, described
/// as a tensor of shape [heads, headDim/2, 2, trailing…] named `name`. Errors when the rows do not split into
/// `heads` heads of an even size.
Result<TensorInfo> permuteRotaryRows(const TensorInfo& tensor, std::int64_t heads, const std::string& name);

} // namespace tessera
