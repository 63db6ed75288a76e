// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `--debug`: a log on stderr detailed enough to attach to a bug report: every file read with its layout, the
// mapping rule behind every name, every tensor's plan (sources, boxes, copy mode, dtype conversion, LoRA), and
// how long each stage took.

#include "mapping/megatron_mapping.h"
#include "merge/merge_plan.h"
#include "model/checkpoint.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace tessera::cli {

class DebugLog {
public:
    explicit DebugLog(bool enabled = false);
    bool enabled() const { return m_enabled; }
    /// "tessera: debug: [  0.123 s] text" on stderr, when enabled.
    void line(const std::string& text) const;
    /// Ends a stage: logs its name and the time since the previous stage ended.
    void stage(const std::string& name);
    /// Logs stages timed elsewhere (a prepare's), as stage() would have; the next stage() counts from now.
    void stagesTaken(const std::vector<std::pair<std::string, double>>& stages);

    /// The checkpoint as scanned: layout, parallel sizes, every file read, problems.
    void checkpoint(const CheckpointInfo& info) const;
    /// Every row of a name mapping: source → target, rule, transform, status.
    void mapping(const MappingResult& result) const;
    /// Every tensor of a plan: where it goes, how it is copied, from which pieces.
    void plan(const MergePlan& plan, const CheckpointInfo& info, const std::string& label) const;

private:
    bool m_enabled;
    std::chrono::steady_clock::time_point m_start;
    std::chrono::steady_clock::time_point m_last;
};

} // namespace tessera::cli
