// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_plan.h"
#include "split/split_training.h"

#include "io/byte_size.h"
#include "io/number_text.h"
#include "io/printable.h"
#include "io/regex.h"
#include "model/placement.h"
#include "split/split_megatron.h"
#include "split/split_sharded.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>

namespace tessera {

const char* splitFormatName(SplitFormat format)
{
    switch (format) {
    case SplitFormat::Fsdp: return "fsdp";
    case SplitFormat::Dcp: return "dcp";
    case SplitFormat::Megatron: return "megatron";
    case SplitFormat::MegatronDist: return "megatron-dist";
    }
    return "?";
}

Result<SplitFormat> splitFormatFromName(const std::string& name)
{
    if (name == "fsdp" || name == "fsdp2")
        return SplitFormat::Fsdp;
    if (name == "dcp")
        return SplitFormat::Dcp;
    if (name == "megatron")
        return SplitFormat::Megatron;
    if (name == "megatron-dist" || name == "torch_dist")
        return SplitFormat::MegatronDist;
    return makeError("--format must be fsdp, dcp, megatron or megatron-dist (got '" + name + "')");
}

Result<Shape> parseMeshShape(const std::string& text)
{
    Shape mesh;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t end = text.find_first_of("x×,*", start);
        const std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
        const auto v = parseWholeNumber(part, 1'000'000);
        if (!v || *v < 1)
            return makeError("--mesh must be sizes like 2x2 or 8, each from 1 to 1000000 (got '" + text + "')");
        mesh.push_back(static_cast<std::int64_t>(*v));
        if (end == std::string::npos)
            break;
        start = end + (text.compare(end, 2, "×") == 0 ? 2 : 1);
    }
    return mesh;
}

std::vector<std::string> parseMeshDimNames(const std::string& text)
{
    std::vector<std::string> names;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t end = text.find(',', start);
        names.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos)
            break;
        start = end + 1;
    }
    return names;
}

std::optional<std::int64_t> verlRunIteration(const std::string& target)
{
    namespace fs = std::filesystem;
    fs::path p = fs::path(target).lexically_normal();
    if (p.filename().empty())
        p = p.parent_path();
    static const Regex step = Regex::fixed("global_step_([0-9]{1,15})");
    std::vector<std::string> m;
    const std::string parent = p.parent_path().filename().string();
    if (p.filename() != "actor" || !step.fullMatch(parent, m))
        return std::nullopt;
    return std::stoll(m[0]);
}

std::uint64_t SplitTensor::bytes() const { return shapeNumel(spec.shape) * dtypeSize(spec.dtype); }

std::vector<std::string> SplitPlan::topLevelNames() const
{
    std::vector<std::string> names;
    auto add = [&](const std::string& path) {
        const std::string top = path.substr(0, path.find('/'));
        if (std::find(names.begin(), names.end(), top) == names.end())
            names.push_back(top);
    };
    for (const auto& f : files)
        add(f.name);
    if (training) {
        for (const auto& f : training->files.files)
            add(f.name);
        for (const auto& e : training->extraState)
            add(e.name);
    }
    if (!config.files.empty())
        add(sideFolder.empty() ? config.files.front() : sideFolder);
    if (sideFolder.empty())
        for (const auto& s : config.files)
            add(s);
    for (const auto& g : generatedFiles)
        add(g.first);
    for (const auto& g : generatedPickles)
        add(g.first);
    return names;
}

Result<SplitPlan> planSplit(const MergePlan& model, const SplitOptions& options)
{
    if (options.format == SplitFormat::Megatron || options.format == SplitFormat::MegatronDist)
        return planMegatronSplit(model, options);
    return planShardedSplit(model, options);
}

namespace {

/// The training state carried (null when none is).
nlohmann::json trainingJson(const SplitPlan& plan)
{
    if (!plan.training)
        return nullptr;
    const TrainingSplit& t = *plan.training;
    nlohmann::json optimizer = nlohmann::json::array();
    for (const auto& f : t.files.files)
        optimizer.push_back({ { "name", f.name }, { "rank", f.rank }, { "bytes", f.bytes }, { "tensors", f.tensors.size() } });
    nlohmann::json extra = nlohmann::json::array();
    for (const auto& e : t.extraState)
        extra.push_back({ { "name", e.name }, { "from_rank", e.fromRank }, { "source", e.source } });
    return { { "optimizer_files", optimizer }, { "optimizer", t.state.optimizerKind },
             { "parameters", t.state.parameters.size() }, { "extra_state_files", extra },
             { "data", t.dataSource.empty() ? nlohmann::json(nullptr)
                                            : nlohmann::json { { "source", t.dataSource }, { "target", t.dataTarget } } },
             { "notes", t.notes } };
}

/// The training state's lines of the summary.
void summarizeTraining(std::ostringstream& s, const SplitPlan& plan)
{
    if (!plan.training)
        return;
    const TrainingSplit& t = *plan.training;
    s << "Training state (so the run resumes on " << plan.worldSize << " ranks):\n";
    if (!t.files.files.empty())
        s << (t.state.dcp ? "  __R_1.distcp  " : "  optim_world_size_" + std::to_string(plan.worldSize) + "_rank_R.pt  ")
          << t.files.files.size() << " files, " << formatBytes(t.bytes) << "\n";
    if (!t.extraState.empty())
        s << "  extra_state_world_size_" << plan.worldSize << "_rank_R.pt  " << t.extraState.size() << " files\n";
    for (const auto& note : t.notes)
        s << "  " << printableText(note) << "\n";
}

} // namespace

nlohmann::json splitPlanToJson(const SplitPlan& plan, const MergePlan& model)
{
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : plan.files) {
        nlohmann::json tensors = nlohmann::json::array();
        for (const auto& t : f.tensors) {
            nlohmann::json boxes = nlohmann::json::array();
            for (const auto& b : t.fragments) {
                boxes.push_back({ { "source", model.tensors[b.source].name }, { "offsets", b.sourceOffsets },
                                  { "shape", b.shape }, { "local_offsets", b.localOffsets } });
                if (!b.sourceBoxShape.empty())
                    boxes.back()["source_box_shape"] = b.sourceBoxShape;
            }
            nlohmann::json j { { "name", t.spec.name }, { "dtype", torchName(t.spec.dtype) },
                               { "local_shape", t.spec.shape }, { "global_shape", t.globalShape },
                               { "bytes", t.bytes() }, { "storage_bytes", t.spec.storageBytes() }, { "boxes", boxes } };
            if (t.spec.dtensor)
                j["placement"] = describePlacements(t.spec.placements, t.spec.mesh.shape, t.spec.mesh.dimNames);
            if (f.kind == SplitFile::Kind::DcpItems)
                j["chunk_offsets"] = t.chunkOffsets;
            tensors.push_back(std::move(j));
        }
        files.push_back({ { "name", f.name }, { "rank", f.rank }, { "bytes", f.bytes }, { "tensors", tensors } });
    }
    nlohmann::json generated = nlohmann::json::array();
    for (const auto& g : plan.generatedFiles)
        generated.push_back(g.first);
    return { { "format", splitFormatName(plan.format) }, { "layout", plan.layout }, { "world_size", plan.worldSize },
             { "mesh", plan.mesh }, { "mesh_dim_names", plan.meshDimNames }, { "files", files },
             { "generated_files", generated }, { "config_dir", plan.config.path }, { "side_files", plan.config.files },
             { "side_folder", plan.sideFolder }, { "total_bytes", plan.totalBytes }, { "disk_bytes", plan.diskBytes },
             { "largest_tensor_bytes", plan.largestTensorBytes }, { "memory_bytes", plan.memoryBytes },
             { "warnings", plan.warnings }, { "training_state", trainingJson(plan) } };
}

std::string splitPlanSummary(const SplitPlan& plan, const MergePlan& model, bool listTensors)
{
    // Tensor names, the config folder and its files come from the checkpoint: each is escaped where it is put in a
    // line, so a name cannot forge one.
    std::ostringstream s;
    s << "Layout:  " << plan.layout << "\n";
    s << "Model:   " << model.tensors.size() << " tensors, " << formatBytes(model.totalBytes) << "\n";
    s << "Files:   " << plan.files.size() << " (" << formatBytes(plan.totalBytes) << " of tensor data)\n";
    const std::size_t shown = std::min<std::size_t>(plan.files.size(), 8);
    for (std::size_t i = 0; i < shown; ++i)
        s << "  " << plan.files[i].name << "  " << plan.files[i].tensors.size() << " tensors, "
          << formatBytes(plan.files[i].bytes) << "\n";
    if (shown < plan.files.size())
        s << "  … and " << plan.files.size() - shown << " more\n";
    for (const auto& g : plan.generatedFiles)
        s << "  " << g.first << "\n";
    if (!plan.config.files.empty())
        s << "  " << (plan.sideFolder.empty() ? std::string() : plan.sideFolder + "/") << " " << plan.config.files.size()
          << " config and tokenizer files from " << printableText(plan.config.path) << "\n";
    else
        s << "  (no config.json found: the checkpoint will have no config or tokenizer files)\n";
    if (plan.runIteration)
        s << "  ../../latest_checkpointed_iteration.txt = " << *plan.runIteration << "\n";
    summarizeTraining(s, plan);
    s << "Disk:    about " << formatBytes(plan.diskBytes) << "\n";
    s << "Memory:  about " << formatBytes(plan.memoryBytes) << " (twice the largest tensor, "
      << formatBytes(plan.largestTensorBytes) << ", plus buffers)\n";
    for (const auto& w : plan.warnings)
        s << "Warning: " << printableText(w) << "\n";
    if (listTensors && !plan.files.empty()) {
        s << "\n" << plan.files.front().name << ":\n";
        for (const auto& t : plan.files.front().tensors) {
            s << "  " << printableText(t.spec.name) << "  " << torchName(t.spec.dtype) << " "
              << shapeToString(t.spec.shape) << " of " << shapeToString(t.globalShape);
            for (const auto& b : t.fragments)
                s << "  " << boxText(b.sourceOffsets, b.shape);
            s << "\n";
        }
    }
    return s.str();
}

} // namespace tessera
