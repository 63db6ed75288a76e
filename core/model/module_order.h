// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tessera {

/// The order a Hugging Face model's `state_dict()` lists `names` in (module registration order), which a
/// safetensors file does not keep (it sorts its keys): the embedding, the layers numerically, the final norm,
/// the head; in a layer self_attn (q, k, v, o, q_norm, k_norm) then mlp (router, gate, up, down, experts by
/// number, shared expert) then the norms; weight before bias. Names it does not know sort by name after the ones
/// it knows at the same level. Returns indices into `names`.
std::vector<std::size_t> moduleOrder(const std::vector<std::string>& names);

} // namespace tessera
