// SPDX-License-Identifier: GPL-3.0-or-later
#include "debug_log.h"

#include "program.h"

#include "io/byte_size.h"
#include "io/printable.h"
#include "model/checkpoint_report.h"
#include "model/placement.h"

#include <cstdio>
#include <iostream>

namespace tessera::cli {

namespace {

const char* modeText(const PlannedTensor& t) { return t.delta ? "fuse (LoRA)" : copyModeName(t.mode); }

} // namespace

DebugLog::DebugLog(bool enabled)
    : m_enabled(enabled), m_start(std::chrono::steady_clock::now()), m_last(m_start)
{
}

void DebugLog::line(const std::string& text) const
{
    if (!m_enabled)
        return;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "[%8.3f s] ", t);
    std::cerr << kProgram.name << ": debug: " << stamp << printableText(text) << "\n";
}

void DebugLog::stage(const std::string& name)
{
    const auto now = std::chrono::steady_clock::now();
    char took[32];
    std::snprintf(took, sizeof took, "%.3f", std::chrono::duration<double>(now - m_last).count());
    line("stage " + name + " took " + took + " s");
    m_last = now;
}

void DebugLog::stagesTaken(const std::vector<std::pair<std::string, double>>& stages)
{
    for (const auto& [name, seconds] : stages) {
        char took[32];
        std::snprintf(took, sizeof took, "%.3f", seconds);
        line("stage " + name + " took " + took + " s");
    }
    m_last = std::chrono::steady_clock::now();
}

void DebugLog::checkpoint(const CheckpointInfo& info) const
{
    if (!m_enabled)
        return;
    const auto& p = info.parallel;
    line("checkpoint " + info.root + ": layout " + info.layout + ", " + std::to_string(info.tensors.size())
         + " tensors, " + formatBytes(info.totalBytes()) + "; world size " + std::to_string(p.worldSize) + ", TP "
         + std::to_string(p.tensorParallel) + ", PP " + std::to_string(p.pipelineParallel) + ", VPP "
         + std::to_string(p.virtualPipeline) + ", EP " + std::to_string(p.expertParallel));
    line("config folder: " + (info.hfConfigDir.empty() ? std::string("(none found)") : info.hfConfigDir));
    for (const auto& f : info.files)
        line("read " + f + " (" + info.layout + ")");
    for (const auto& [key, value] : info.notes)
        line("note " + key + ": " + value);
    for (const auto& problem : info.problems)
        line("problem: " + problem.text());
}

void DebugLog::mapping(const MappingResult& result) const
{
    if (!m_enabled)
        return;
    if (result.family.empty() && result.ruleSources.empty())
        line("mapping: Hugging Face names, written as they are; config " + result.configPath);
    else
        line("mapping: rules " + result.family + " from " + [&] {
        std::string s;
        for (const auto& src : result.ruleSources)
            s += (s.empty() ? "" : ", ") + src;
        return s;
    }() + "; config " + result.configPath);
    for (const auto& r : result.rows)
        line("map " + (r.source.empty() ? std::string("(no source)") : r.source) + " -> "
             + (r.target.empty() ? std::string("(none)") : r.target) + "  rule " + (r.rule.empty() ? "-" : r.rule)
             + ", " + (r.transform.empty() ? "-" : r.transform) + ", " + mappingStatusName(r.status)
             + (r.detail.empty() ? "" : ": " + r.detail));
}

void DebugLog::plan(const MergePlan& plan, const CheckpointInfo& info, const std::string& label) const
{
    if (!m_enabled)
        return;
    line("plan" + (label.empty() ? std::string() : " of " + label) + ": " + std::to_string(plan.tensors.size())
         + " tensors in " + std::to_string(plan.files.size()) + " file(s), " + formatBytes(plan.totalBytes)
         + "; memory about " + formatBytes(plan.memoryBytes));
    for (const auto& t : plan.tensors) {
        const TensorInfo& src = info.tensors[t.source];
        std::string conversion = std::string(torchName(t.sourceDtype));
        if (t.dtype != t.sourceDtype)
            conversion += " -> " + std::string(torchName(t.dtype));
        line("tensor " + t.name + " " + shapeToString(t.shape) + " " + conversion + ": " + modeText(t) + " into "
             + plan.files[t.file].name + " @" + std::to_string(t.fileOffset) + ", " + std::to_string(t.bytes)
             + " bytes" + (src.placement.empty() ? "" : ", placement " + src.placement)
             + (t.bufferBytes ? ", buffer " + formatBytes(t.bufferBytes) : ""));
        for (auto i : t.pieces) {
            const Piece& p = src.pieces[i];
            line("  piece " + boxText(p.offsets, p.shape) + " " + pieceRoleName(p.role) + " rank " + std::to_string(p.rank)
                 + " " + storedTypeName(p) + " from " + p.file + " @" + std::to_string(p.dataOffset));
        }
        for (const auto& [replica, primary] : t.replicas)
            line("  replica on rank " + std::to_string(src.pieces[replica].rank) + " of the piece on rank "
                 + std::to_string(src.pieces[primary].rank) + " (read only with --verify-replicas)");
        if (t.delta)
            line("  LoRA update (B·A)·" + std::to_string(t.delta->scale) + " from " + t.delta->a.name + " "
                 + shapeToString(t.delta->a.shape) + " and " + t.delta->b.name + " " + shapeToString(t.delta->b.shape));
    }
    for (const auto& d : plan.dropped)
        line("not written: " + d);
    for (const auto& w : plan.warnings)
        line("warning: " + w);
}

} // namespace tessera::cli
