// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_plan.h"

#include "io/byte_size.h"
#include "model/module_order.h"
#include "model/placement.h"
#include "split/split_megatron.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <filesystem>
#include <regex>
#include <sstream>

namespace tessera {

namespace {

/// A rank count past which a layout is surely a typo (and would open that many files at once).
constexpr int kMaxRanks = 16384;
/// The engine's working memory besides its tensor buffers: chunk staging, pickles, file buffers.
constexpr std::uint64_t kEngineOverhead = 64ull << 20;
/// torch.save's per-record overhead (local header, FB padding, data descriptor, central directory entry).
constexpr std::uint64_t kRecordOverhead = 64 + 30 + 16 + 46 + 64;

std::uint64_t numel(const Shape& shape)
{
    std::uint64_t n = 1;
    for (auto s : shape)
        n *= static_cast<std::uint64_t>(s);
    return n;
}

/// Row-major mesh coordinate of rank `r`.
Shape coordinateOf(std::int64_t r, const Shape& mesh)
{
    Shape c(mesh.size());
    for (std::size_t d = mesh.size(); d-- > 0;) {
        c[d] = r % mesh[d];
        r /= mesh[d];
    }
    return c;
}

std::string json2(const nlohmann::json& j) { return j.dump(2); }

/// FSDP2 keeps a rank's shard in a storage padded to the first rank's shard size along the sharded dim (so
/// every rank's all-gather input has the same size), and torch.save writes that whole storage.
std::uint64_t fsdpPaddedElements(const Shape& global, std::int64_t shards)
{
    if (global.empty())
        return 1;
    const std::int64_t rows = (global[0] + shards - 1) / shards;
    return static_cast<std::uint64_t>(rows) * (global[0] ? numel(global) / static_cast<std::uint64_t>(global[0])
                                                         : numel(Shape(global.begin() + 1, global.end())));
}

Status checkSizes(const SplitOptions& o, Shape& mesh, std::vector<std::string>& names, int& world)
{
    std::vector<std::string> errors;
    mesh = o.mesh.empty() ? Shape { o.worldSize } : o.mesh;
    std::int64_t product = 1;
    for (auto m : mesh) {
        if (m < 1 || m > kMaxRanks) {
            errors.push_back("every mesh size must be between 1 and " + std::to_string(kMaxRanks) + " (got "
                             + shapeToString(mesh) + ")");
            break;
        }
        product *= m;
    }
    if (errors.empty() && product > kMaxRanks)
        errors.push_back("a mesh of " + std::to_string(product) + " ranks is more than the " + std::to_string(kMaxRanks)
                         + " supported");
    if (errors.empty() && o.worldSize > 0 && product != o.worldSize)
        errors.push_back("--world_size " + std::to_string(o.worldSize) + " does not match the mesh "
                         + shapeToString(mesh) + " (" + std::to_string(product) + " ranks)");
    if (o.worldSize < 0 || (o.worldSize == 0 && o.mesh.empty()))
        errors.push_back("give the number of ranks (--world_size N)");
    world = static_cast<int>(product);
    names = o.meshDimNames;
    if (names.empty()) {
        if (mesh.size() == 1)
            names = { "fsdp" };
        else if (mesh.size() == 2)
            names = { "ddp", "fsdp" };
        else
            errors.push_back("a " + std::to_string(mesh.size()) + "-D mesh needs --mesh_dim_names");
    } else if (names.size() != mesh.size()) {
        errors.push_back("--mesh_dim_names gives " + std::to_string(names.size()) + " names for a "
                         + std::to_string(mesh.size()) + "-D mesh");
    }
    if (o.format == SplitFormat::Dcp && mesh.size() != 1)
        errors.push_back("--format dcp shards every tensor over one mesh dim; give --world_size only");
    if (errors.empty())
        return Status::success();
    std::string message = "cannot lay the model out this way:";
    for (const auto& e : errors)
        message += "\n  " + e;
    return makeError(message);
}

} // namespace

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
        char* stop = nullptr;
        const long long v = std::strtoll(part.c_str(), &stop, 10);
        if (part.empty() || *stop != '\0' || v < 1 || v > 1'000'000)
            return makeError("--mesh must be sizes like 2x2 or 8 (got '" + text + "')");
        mesh.push_back(v);
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
    static const std::regex step("global_step_([0-9]{1,15})");
    std::smatch m;
    const std::string parent = p.parent_path().filename().string();
    if (p.filename() != "actor" || !std::regex_match(parent, m, step))
        return std::nullopt;
    return std::stoll(m[1].str());
}

std::uint64_t SplitTensor::bytes() const { return numel(spec.shape) * dtypeSize(spec.dtype); }

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
    if (!sideFiles.empty())
        add(sideFolder.empty() ? sideFiles.front() : sideFolder);
    if (sideFolder.empty())
        for (const auto& s : sideFiles)
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
    SplitPlan plan;
    plan.format = options.format;
    TESSERA_TRY(checkSizes(options, plan.mesh, plan.meshDimNames, plan.worldSize));
    plan.runIteration = options.runIteration;
    plan.configDir = model.configDir;
    plan.sideFiles = model.sideFiles;

    DeviceMesh mesh; // its ranks are plan.meshRanks (see SplitTensor::spec)
    mesh.shape = plan.mesh;
    mesh.dimNames = plan.meshDimNames;
    for (int r = 0; r < plan.worldSize; ++r)
        plan.meshRanks.push_back(r);
    // FSDP2 shards dim 0 over the last mesh dim and replicates over the others (HSDP: (Replicate(), Shard(0))).
    std::vector<Placement> placements(plan.mesh.size(), Placement::replicate());
    placements.back() = Placement::shard(0);
    const std::int64_t shards = plan.mesh.back();

    std::vector<std::string> errors;
    for (const auto& t : model.tensors) {
        plan.largestTensorBytes = std::max(plan.largestTensorBytes, t.bytes);
        if (t.shape.empty())
            errors.push_back(t.name + ": a 0-dim tensor cannot be sharded along dim 0");
    }
    if (!errors.empty()) {
        std::string message = "cannot lay the model out this way:";
        for (const auto& e : errors)
            message += "\n  " + e;
        return makeError(message);
    }

    std::vector<std::size_t> keyOrder(model.tensors.size());
    std::iota(keyOrder.begin(), keyOrder.end(), 0);
    if (options.moduleOrder) {
        std::vector<std::string> names;
        for (const auto& t : model.tensors)
            names.push_back(t.name);
        keyOrder = moduleOrder(names);
    }
    const bool fsdp = options.format == SplitFormat::Fsdp;
    for (int r = 0; r < plan.worldSize; ++r) {
        SplitFile file;
        file.rank = r;
        if (fsdp) {
            file.name = "model_world_size_" + std::to_string(plan.worldSize) + "_rank_" + std::to_string(r) + ".pt";
            file.kind = SplitFile::Kind::StateDict;
            file.archiveName = file.name.substr(0, file.name.size() - 3);
        } else {
            file.name = "__" + std::to_string(r) + "_0.distcp";
            file.kind = SplitFile::Kind::DcpItems;
            file.archiveName = "archive";
        }
        const Shape coordinate = coordinateOf(r, plan.mesh);
        for (std::size_t i : keyOrder) {
            const PlannedTensor& src = model.tensors[i];
            auto layout = computeLocalLayout(src.shape, plan.mesh, coordinate, placements);
            if (!layout)
                return layout.error().withContext(src.name);
            SplitTensor out;
            out.globalShape = src.shape;
            out.chunkOffsets = layout->globalOffset;
            out.spec.name = src.name;
            out.spec.dtype = src.dtype;
            out.spec.shape = layout->localShape;
            if (fsdp) {
                out.spec.dtensor = true;
                out.spec.globalShape = src.shape;
                out.spec.placements = placements;
                out.spec.mesh = mesh;
                out.spec.coordinate = coordinate;
                out.spec.storageElements = fsdpPaddedElements(src.shape, shards);
            }
            for (const auto& box : layout->boxes)
                out.fragments.push_back({ i, box.globalOffsets, box.shape, box.localOffsets, std::nullopt, {} });
            file.bytes += out.spec.storageBytes();
            file.tensors.push_back(std::move(out));
        }
        plan.totalBytes += file.bytes;
        plan.diskBytes += file.bytes + file.tensors.size() * (kRecordOverhead + (fsdp ? 1200 : 400)) + 4096;
        plan.files.push_back(std::move(file));
    }

    std::ostringstream layout;
    if (fsdp) {
        plan.layout = "FSDP2, world size " + std::to_string(plan.worldSize) + ", "
            + describePlacements(placements, plan.mesh, plan.meshDimNames);
        plan.generatedFiles.emplace_back("fsdp_config.json",
                                         json2({ { "FSDP_version", 2 }, { "world_size", plan.worldSize } }));
        plan.sideFolder = "huggingface";
        plan.keystone = "fsdp_config.json";
    } else {
        plan.keystone = ".metadata";
        plan.layout = "PyTorch DCP, " + std::to_string(plan.worldSize) + " rank" + (plan.worldSize == 1 ? "" : "s")
            + ", every tensor Shard(0)";
        // .metadata is written by the engine once the item offsets are known; config files sit beside it.
        plan.diskBytes += 4096 + model.tensors.size() * plan.worldSize * 200;
    }
    plan.diskBytes += 1u << 20; // config and tokenizer files, generously
    plan.memoryBytes = 2 * plan.largestTensorBytes + kEngineOverhead;
    if (plan.worldSize > 1) {
        std::size_t empty = 0;
        for (const auto& t : plan.files.back().tensors)
            empty += t.bytes() == 0 ? 1 : 0;
        if (empty)
            plan.warnings.push_back(std::to_string(empty) + " tensors have fewer rows than the " + std::to_string(shards)
                                    + " shards: the last ranks hold empty shards of them (as FSDP2 does)");
    }
    return plan;
}

nlohmann::json splitPlanToJson(const SplitPlan& plan, const MergePlan& model)
{
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : plan.files) {
        nlohmann::json tensors = nlohmann::json::array();
        for (const auto& t : f.tensors) {
            nlohmann::json boxes = nlohmann::json::array();
            for (const auto& b : t.fragments)
                boxes.push_back({ { "source", model.tensors[b.source].name }, { "offsets", b.sourceOffsets },
                                  { "shape", b.shape }, { "local_offsets", b.localOffsets } });
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
             { "generated_files", generated }, { "config_dir", plan.configDir }, { "side_files", plan.sideFiles },
             { "side_folder", plan.sideFolder }, { "total_bytes", plan.totalBytes }, { "disk_bytes", plan.diskBytes },
             { "largest_tensor_bytes", plan.largestTensorBytes }, { "memory_bytes", plan.memoryBytes },
             { "warnings", plan.warnings } };
}

std::string splitPlanSummary(const SplitPlan& plan, const MergePlan& model, bool listTensors)
{
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
    if (!plan.sideFiles.empty())
        s << "  " << (plan.sideFolder.empty() ? std::string() : plan.sideFolder + "/") << " " << plan.sideFiles.size()
          << " config and tokenizer files from " << plan.configDir << "\n";
    else
        s << "  (no config.json found: the checkpoint will have no config or tokenizer files)\n";
    if (plan.runIteration)
        s << "  ../../latest_checkpointed_iteration.txt = " << *plan.runIteration << "\n";
    s << "Disk:    about " << formatBytes(plan.diskBytes) << "\n";
    s << "Memory:  about " << formatBytes(plan.memoryBytes) << " (twice the largest tensor, "
      << formatBytes(plan.largestTensorBytes) << ", plus buffers)\n";
    for (const auto& w : plan.warnings)
        s << "Warning: " << w << "\n";
    if (listTensors && !plan.files.empty()) {
        s << "\n" << plan.files.front().name << ":\n";
        for (const auto& t : plan.files.front().tensors) {
            s << "  " << t.spec.name << "  " << torchName(t.spec.dtype) << " " << shapeToString(t.spec.shape) << " of "
              << shapeToString(t.globalShape);
            for (const auto& b : t.fragments)
                s << "  " << boxText(b.sourceOffsets, b.shape);
            s << "\n";
        }
    }
    return s.str();
}

} // namespace tessera
