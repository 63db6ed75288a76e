// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>

namespace tessera::ui {

/// Where a tensor sits in a model's stack of layers, read from its name (Hugging Face or Megatron).
struct LayerPosition {
    qlonglong layer = -1;  ///< the number after layers, layer, h, blocks or blk; -1 outside the layers
    qlonglong expert = -1; ///< the number after experts or local_experts (Megatron's grouped "weight5"); -1 if none
    bool vision = false;   ///< in a vision tower, whose layers are numbered from 0 too
    /// The name after the layer's number with the expert's number as "*" ("self_attn.q_proj.weight",
    /// "mlp.experts.*.down_proj.weight"): the same module in every layer; empty outside the layers.
    QString module;
};

LayerPosition layerPosition(const QString& name);

} // namespace tessera::ui
