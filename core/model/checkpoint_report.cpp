// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/checkpoint_report.h"
#include "model/optimizer_report.h"
#include "io/printable.h"

#include "io/byte_size.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

namespace tessera {

const char* pieceRoleName(PieceRole role)
{
    switch (role) {
    case PieceRole::Primary: return "primary";
    case PieceRole::Replica: return "replica";
    case PieceRole::PartialTerm: return "partial";
    }
    return "primary";
}

namespace {

/// Paths relative to the checkpoint root keep the JSON readable and portable.
std::string relativeTo(const std::string& file, const std::string& root)
{
    std::error_code ec;
    auto rel = std::filesystem::relative(file, root, ec);
    if (ec || rel.empty() || rel.native().rfind("..", 0) == 0)
        return file;
    return rel.string();
}

nlohmann::json parallelToJson(const ParallelConfig& p)
{
    nlohmann::json j = nlohmann::json::object();
    j["world_size"] = p.worldSize;
    auto meshes = nlohmann::json::array();
    for (const auto& m : p.meshes)
        meshes.push_back({ { "shape", m.shape }, { "dim_names", m.dimNames }, { "ranks", m.ranks } });
    j["meshes"] = meshes;
    auto put = [&](const char* key, int value) {
        if (value > 0)
            j[key] = value;
    };
    put("tp", p.tensorParallel);
    put("pp", p.pipelineParallel);
    put("vpp", p.virtualPipeline);
    put("ep", p.expertParallel);
    put("dp", p.dataParallel);
    return j;
}

/// "  stored as MXFP4" for a tensor whose pieces are block-quantized (read as the values they stand for).
std::string storedAsNote(const TensorInfo& t)
{
    for (const auto& p : t.pieces)
        if (p.encoding != PieceEncoding::Plain)
            return "  stored as " + storedTypeName(p);
    return {};
}
} // namespace

std::string dtypeLabel(DType dtype)
{
    auto code = safetensorsCode(dtype);
    return code.empty() ? std::string(torchName(dtype)) : std::string(code);
}

nlohmann::json checkpointToJson(const CheckpointInfo& info)
{
    nlohmann::json j;
    j["format"] = info.layout;
    j["root"] = info.root;
    j["hf_config_dir"] = info.hfConfigDir;
    j["parallel"] = parallelToJson(info.parallel);
    auto tensors = nlohmann::json::array();
    for (const auto& t : info.tensors) {
        nlohmann::json jt;
        jt["name"] = t.name;
        jt["dtype"] = dtypeLabel(t.dtype);
        jt["shape"] = t.shape;
        if (!t.savedShape.empty())
            jt["saved_shape"] = t.savedShape; // the pieces' boxes are in "shape"
        if (!t.placement.empty())
            jt["placement"] = t.placement;
        auto pieces = nlohmann::json::array();
        for (const auto& p : t.pieces) {
            const std::uint64_t bytes = storedByteOffset(p, shapeNumel(p.shape));
            nlohmann::json jp = { { "file", relativeTo(p.file, info.root) },
                                  { "rank", p.rank },
                                  { "role", pieceRoleName(p.role) },
                                  { "offsets", p.offsets },
                                  { "shape", p.shape },
                                  { "strides", p.strides },
                                  { "byte_offset", p.dataOffset },
                                  { "bytes", bytes } };
            if (p.encoding != PieceEncoding::Plain)
                jp["encoding"] = storedTypeName(p);
            if (p.encoding == PieceEncoding::MXFP4) {
                jp["scale_file"] = relativeTo(p.scaleFile, info.root);
                jp["scale_byte_offset"] = p.scaleOffset;
            }
            pieces.push_back(std::move(jp));
        }
        jt["pieces"] = pieces;
        tensors.push_back(std::move(jt));
    }
    j["tensors"] = tensors;
    auto problems = nlohmann::json::array();
    for (const auto& p : info.problems)
        problems.push_back(p.text());
    j["problems"] = problems;
    if (!info.warnings.empty())
        j["warnings"] = info.warnings;
    if (!info.notes.empty())
        j["notes"] = info.notes;
    if (info.optimizer.present())
        j["optimizer"] = optimizerToJson(info.optimizer);
    return j;
}

std::string checkpointSummary(const CheckpointInfo& info, bool listTensors)
{
    std::ostringstream out;
    // Every string here may come from the checkpoint's files (names, metadata, mesh dims, placements quoting
    // names): each is escaped where it is put in a line.
    out << "Checkpoint  " << printableText(info.root) << "\n";
    out << "Layout      " << info.layout << "\n";
    const auto& p = info.parallel;
    out << "Parallel    world size " << p.worldSize;
    if (p.tensorParallel)
        out << ", TP " << p.tensorParallel;
    if (p.pipelineParallel)
        out << ", PP " << p.pipelineParallel;
    if (p.virtualPipeline)
        out << ", VPP " << p.virtualPipeline;
    if (p.expertParallel)
        out << ", EP " << p.expertParallel;
    out << "\n";
    for (const auto& m : p.meshes) {
        out << "Mesh        ";
        for (std::size_t d = 0; d < m.shape.size(); ++d)
            out << (d ? " × " : "")
                << (d < m.dimNames.size() && !m.dimNames[d].empty() ? printableText(m.dimNames[d]) + "=" : "")
                << m.shape[d];
        out << "\n";
    }
    std::size_t pieces = 0;
    for (const auto& t : info.tensors)
        pieces += t.pieces.size();
    auto counted = [](std::size_t n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); };
    out << "Tensors     " << info.tensors.size() << " (" << formatBytes(info.totalBytes()) << ", "
        << counted(pieces, "piece") << " in " << counted(info.files.size(), "file") << ")\n";
    out << "HF config   "
        << (info.hfConfigDir.empty() ? "not found (use --hf_model_path)" : printableText(info.hfConfigDir)) << "\n";
    for (const auto& [key, value] : info.notes)
        out << "Note        " << printableText(key) << ": " << printableText(value) << "\n";
    if (listTensors) {
        out << "\n";
        for (const auto& t : info.tensors)
            out << "  " << printableText(t.name) << "  " << dtypeLabel(t.dtype) << " " << shapeToString(t.outputShape())
                << (t.savedShape.empty() ? "" : " (boxed as " + shapeToString(t.shape) + ")")
                << (t.placement.empty() ? "" : "  " + printableText(t.placement)) << storedAsNote(t) << "\n";
    }
    out << optimizerSummary(info.optimizer);
    for (const auto& warning : info.warnings)
        out << "Warning     " << warning << "\n";
    if (info.problems.empty()) {
        out << "Problems    none\n";
    } else {
        out << "Problems    " << info.problems.size() << "\n";
        for (const auto& problem : info.problems)
            out << "  - " << problem.text() << "\n";
    }
    return out.str();
}

} // namespace tessera
