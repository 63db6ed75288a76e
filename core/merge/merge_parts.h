// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// One merge split across N processes (`tessera merge --part K/N`), on one machine or many sharing a file system,
// without a coordinator: every process computes the same plan and the same assignment, writes only its share
// into a folder they all find by name, and records that it is done; the process that completes the set verifies
// the records, writes the headers, index and config files and publishes the folder as a single merge would.
//
// The shared folder, the records, the claim and the publish are publish/part_set.h's and publish/part_run.h's;
// this file assigns the bytes of a merge's files to parts and writes a part's share. <id> is a hash of everything
// that decides the output (merge/output_identity.h: the plans, the source files, side files and config edits) and
// of the assignment. A GGUF export is split the same way (merge/gguf_parts.h): its one file is cut into byte
// ranges, and the finishing part writes its header and generated tensors.

#include "merge/merge_engine.h"
#include "publish/part_run.h"
#include "result.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// A run of consecutive tensors of one output file that one part writes: bytes [begin, end) of the file.
struct PartRange {
    std::size_t output = 0;           ///< index into the outputs the parts were planned for
    std::size_t file = 0;             ///< index into that output's MergePlan::files
    std::string path;                 ///< the file's path inside the output folder ("lora_adapter/x.safetensors")
    std::uint64_t begin = 0, end = 0;
    std::vector<std::size_t> tensors; ///< indices into that output's MergePlan::tensors

    bool operator==(const PartRange& o) const { return path == o.path && begin == o.begin && end == o.end; }
};

/// What one part writes.
struct PartShare {
    std::vector<PartRange> ranges;
    std::uint64_t bytes = 0;
    std::size_t wholeFiles = 0;       ///< files this part writes entirely
};

/// The assignment of a merge to N parts: a deterministic function of the plans alone.
struct PartsPlan {
    unsigned parts = 1;
    std::string id;                   ///< 16 hex digits naming the set (the outputs' identity and the assignment)
    std::uint64_t totalBytes = 0;
    std::uint64_t largestTensorBytes = 0;
    std::vector<PartShare> shares;    ///< one per part
};

/// Cuts the tensor bytes of `outputs` (every file in order, as one stream) into `parts` contiguous shares of about
/// equal bytes. Each cut falls on a file boundary when one lies within an eighth of a share of the ideal cut k·T/N,
/// else on the nearest tensor boundary (within half the largest tensor of it): with many files every part writes
/// whole files, with one big file each writes a byte range of it. Any single-file output whose plan places tensors
/// at fixed offsets after a header is cut the same way (safetensors here; a GGUF file in merge/gguf_parts.h).
Result<PartsPlan> planParts(const std::vector<MergeOutput>& outputs, unsigned parts);

/// What one part did (see publish/part_run.h), and the warnings of the finishing write.
struct PartOutcome : PartRunOutcome {
    std::vector<std::string> warnings;
};

/// How a part writes outputs that writeMergedFiles() does not write alone (a GGUF file, whose Q8_0 and generated
/// tensors are written beside the streamed ones: see merge/gguf_parts.h). Every member is optional.
struct PartWriting {
    /// Called as writeMergedFiles() would be, with `run.onlyTensors` (this part's tensors; none when finishing) and
    /// `run.writeFinish` (what only the finishing part writes); tells `run.onTensorBytes` every block it writes.
    std::function<Result<MergeOutcome>(const MergeOutput& output, const std::string& dir, const MergeRunOptions& run)>
        write;
    /// Refuses a target the output cannot go into, before a new set is made (default: checkMergeTargets()).
    std::function<Status(const std::string& targetDir)> checkTarget;
    /// The names published last, in order (default: the index or the only model file, then config.json).
    std::vector<std::string> keystones;
};

/// Runs part `part` (0-based) of `parts` into `targetDir` (publish/part_run.h): writes the part's ranges into the
/// shared folder (or checks them, when a record says they are there), records them, and when every part's record
/// is there, claims the set, checks every recorded byte, writes the headers, index and config files and publishes.
/// Idempotent: re-running a part (killed, failed or finished) only completes the set. On any error the target is
/// left as it was and the shared folder kept for a re-run.
Result<PartOutcome> runMergePart(const std::vector<MergeOutput>& outputs, const PartsPlan& plan, unsigned part,
                                 const std::string& targetDir, const MergeRunOptions& options,
                                 const PartWriting& writing = {});

} // namespace tessera
