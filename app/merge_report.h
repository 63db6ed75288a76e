// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `--save_intermediate`: merge_report.json in the target folder, the provenance of every written tensor (its
// source pieces, the mapping rule and transform that named it, the CRC-32 of its bytes as written), so that a
// merged model can always be traced back to the checkpoint it came from.

#include "mapping/megatron_mapping.h"
#include "merge/merge_engine.h"
#include "result.h"

#include <string>
#include <vector>

namespace tessera::cli {

inline constexpr const char* kMergeReportFile = "merge_report.json";

/// Writes merge_report.json into `dir`, the staging folder of a merge of `outputs` into `targetDir` holding
/// `files`, before it is published (so the report appears with the model, atomically); `mapping` holds the rows of
/// a Megatron mapping (empty for other layouts). Reads back each written tensor to checksum it. Returns the name
/// of the file written.
Result<std::vector<std::string>> writeMergeReport(const std::string& dir, const std::string& targetDir,
                                                  const std::vector<MergeOutput>& outputs,
                                                  const std::vector<std::string>& files,
                                                  const std::vector<MappingRow>& mapping);

} // namespace tessera::cli
