// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Megatron-core parameter names: how each one is split over tensor-parallel ranks, and how local layer and
// expert numbers in a per-rank file become global ones.

#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

/// How tensor-parallel ranks hold a parameter (FORMATS.md §4.2 "TP axis map", §4.3).
enum class MegatronTpSplit {
    Replicated, ///< every TP rank holds the whole tensor (norms, routers, row-parallel biases)
    Rows,       ///< column-parallel: rank r holds rows [r·n, (r+1)·n)
    Columns,    ///< row-parallel: rank r holds columns [r·n, (r+1)·n)
    GluRows,    ///< gated linear_fc1: rank r holds [gate_r; up_r] of a global [gate; up]
};

/// What marks a LoRA factor in a Megatron name: `<linear>.adapter.linear_in.weight` (A, [r, in]) and
/// `<linear>.adapter.linear_out.weight` (B, [out, r]), as Megatron-Bridge's (and NeMo's) LoRA names them.
inline constexpr const char* kMegatronAdapterMarker = ".adapter.linear_";

/// A LoRA factor's name split: the weight it adapts, and which factor it is.
struct MegatronAdapterName {
    std::string weight; ///< "decoder.layers.0.self_attention.linear_qkv.weight"
    bool isA = false;   ///< linear_in (A); else linear_out (B)
};

/// Splits a LoRA factor's name; nullopt for anything else (a LoRA bias, a DoRA magnitude included).
std::optional<MegatronAdapterName> parseMegatronAdapterName(const std::string& name);

/// The split of `name` (a mcore name, local or global numbering). `gated` is the model's gated_linear_unit.
MegatronTpSplit megatronTpSplit(const std::string& name, bool gated);

/// True for names Tessera never lists as model weights from a per-rank file (Transformer Engine `_extra_state`).
bool isMegatronExtraState(const std::string& name);

/// A name of the form `<prefix>layers.<n>.<rest>` for the decoder's transformer layers.
struct MegatronLayerName {
    std::string prefix;     ///< "decoder.layers." (the part before the number, dot included)
    std::int64_t layer = 0; ///< the number in the name
    std::string rest;       ///< the part after "<n>." ("self_attention.linear_qkv.weight")
};

/// Largest layer or expert number accepted in a name: far beyond any model, small enough that offsets and counts
/// computed from it never overflow.
inline constexpr std::int64_t kMaxMegatronIndex = 1'000'000;

/// Why a `…layers.<n>.…` or expert number in `name` is unusable (past kMaxMegatronIndex); empty when it is fine.
/// The readers report such a tensor as a problem of its file instead of reading it.
std::string megatronIndexProblem(const std::string& name);

/// Splits a `decoder.layers.<n>.…` name; nullopt for names outside the layer stack (and for numbers past
/// kMaxMegatronIndex, which megatronIndexProblem() reports).
std::optional<MegatronLayerName> parseMegatronLayerName(const std::string& name);

/// A multi-token-prediction layer's parameter: `mtp.layers.<k>.<rest>`, where rest is one of its own modules
/// (`enorm.weight`, `hnorm.weight`, `eh_proj.weight`, `final_layernorm.weight`) or its transformer layer's
/// (`mtp_model_layer.<…>`, named `transformer_layer.<…>` before Megatron-core renamed it). Megatron keeps MTP on
/// the last pipeline stage and numbers it apart from the decoder's layers.
struct MegatronMtpName {
    std::string prefix;     ///< "mtp.layers.<k>."
    std::int64_t index = 0; ///< k
    std::string rest;
};

/// Splits an `mtp.layers.<k>.…` name; nullopt for anything else.
std::optional<MegatronMtpName> parseMegatronMtpName(const std::string& name);

/// A routed expert's number inside a layer's `rest`: SequentialMLP `mlp.experts.local_experts.<j>.…` or
/// TEGroupedMLP `mlp.experts.linear_fc1.weight<j>`.
struct MegatronExpertName {
    std::string before;     ///< text before the number
    std::int64_t expert = 0;
    std::string after;      ///< text after the number
};

/// Finds the local expert number in `rest`; nullopt for non-expert parameters (shared experts included).
std::optional<MegatronExpertName> parseMegatronExpertName(const std::string& rest);

} // namespace tessera
