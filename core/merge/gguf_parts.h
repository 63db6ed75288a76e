// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera merge --format gguf --part K/N`: a GGUF export split across processes as a safetensors merge is
// (merge/merge_parts.h: the same shared folder, records, claim and publish). The one file's tensor bytes are cut
// by planParts() into balanced byte ranges on tensor boundaries; each part writes its tensors (streamed, converted
// or quantized) into the shared file at their offsets and records the ranges with their CRC-32; the part
// that completes the set writes what only the whole set can have: the header (metadata and tensor infos) and the
// generated tensors (llama 3's rope_freqs), then checks the records and publishes the file atomically.

#include "merge/gguf_plan.h"
#include "merge/merge_parts.h"

#include <memory>
#include <string>
#include <vector>

namespace tessera {

/// A GGUF export's parts.
struct GgufParts {
    struct View;                      ///< the file as the parts machinery sees it (gguf_parts.cpp)
    std::shared_ptr<const View> view;
    std::vector<MergeOutput> outputs; ///< the one file, for planParts(), runMergePart() and --dry-run's listing
    PartsPlan plan;
    PartWriting writing;
};

/// Plans the parts of the export `gguf`, which must outlive the result. Each tensor the parts write counts with its
/// alignment padding up to the next tensor, so a part's tensors make contiguous ranges (the padding is written as
/// zeros with them); generated tensors belong to no part. The set's id also names the --outtype and --name, so the
/// parts of a q8_0 and an f16 export (or of two names) never mix. A deterministic function of the plan.
Result<GgufParts> planGgufParts(const GgufPlan& gguf, unsigned parts);

/// runMergePart() for part `part` of the export into `targetDir`: idempotent, the target untouched until the last
/// part publishes the file.
Result<PartOutcome> runGgufPart(const GgufParts& parts, unsigned part, const std::string& targetDir,
                                const MergeRunOptions& options);

} // namespace tessera
