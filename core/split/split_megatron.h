// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "merge/merge_plan.h"
#include "result.h"
#include "split/split_plan.h"

namespace tessera {

/// Plans `model` as verl's Megatron actor folder (model/mp_rank_XX[_YYY][_ZZZ]/model.pt, a list of one state dict
/// per virtual pipeline stage, transformer_config.json, hf_config_and_tokenizer/) for options.tp/pp/vpp/ep.
///
/// The names come from the family's mapping rules read backwards (the first Megatron spelling of each rule, the
/// Transformer Engine one; a fused `….layer_norm_weight` only where its linear exists, else the plain norm). The
/// boxes come from the forward mapping itself: the planned Megatron checkpoint is described as the reader would
/// see it, mapped to Hugging Face names exactly as a merge maps it, and every mapped piece says which box of
/// which model tensor lands where in which rank's tensor. So QKV per query group, [gate; up], vocabulary padding
/// (zeros), layer numbering per stage (interleaved for VPP) and experts per EP rank are the inverse of the merge
/// by construction, and a merge of the result gives the model back bit for bit.
Result<SplitPlan> planMegatronSplit(const MergePlan& model, const SplitOptions& options);

} // namespace tessera
