// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_sharded.h"

#include "io/printable.h"
#include "model/module_order.h"
#include "model/placement.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <set>

namespace tessera {

namespace {

/// A rank count past which a layout is surely a typo (and would open that many files at once).
constexpr int kMaxRanks = 16384;
/// The engine's working memory besides its tensor buffers: chunk staging, pickles, file buffers.
constexpr std::uint64_t kEngineOverhead = 64ull << 20;
/// torch.save's per-record overhead (local header, FB padding, data descriptor, central directory entry).
constexpr std::uint64_t kRecordOverhead = 64 + 30 + 16 + 46 + 64;

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
    return static_cast<std::uint64_t>(rows) * (global[0] ? shapeNumel(global) / static_cast<std::uint64_t>(global[0])
                                                         : shapeNumel(Shape(global.begin() + 1, global.end())));
}

/// Every reason the requested layout cannot hold the model, as one error; success when there is none.
Status layoutRefusal(const std::vector<std::string>& errors)
{
    if (errors.empty())
        return Status::success();
    std::string message = "cannot lay the model out this way:";
    for (const auto& e : errors)
        message += "\n  " + e;
    return makeError(message);
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
    // DeviceMesh looks its dims up by name: two dims of one name, or a dim without one, cannot be addressed.
    std::set<std::string> seen;
    for (const auto& name : o.meshDimNames) {
        if (name.empty())
            errors.push_back("--mesh_dim_names has an empty name; give each mesh dim a name (e.g. ddp,fsdp)");
        else if (!seen.insert(name).second)
            errors.push_back("--mesh_dim_names names '" + printableText(name) + "' twice; each mesh dim needs a name "
                             "of its own");
    }
    if (o.format == SplitFormat::Dcp && mesh.size() != 1)
        errors.push_back("--format dcp shards every tensor over one mesh dim; give --world_size only");
    return layoutRefusal(errors);
}

/// A 0-dim tensor has no dim 0 to shard; also notes the largest tensor (the engine's buffer size).
Status checkShardable(const MergePlan& model, SplitPlan& plan)
{
    std::vector<std::string> errors;
    for (const auto& t : model.tensors) {
        plan.largestTensorBytes = std::max(plan.largestTensorBytes, t.bytes);
        if (t.shape.empty())
            errors.push_back(printableText(t.name) + ": a 0-dim tensor cannot be sharded along dim 0");
    }
    return layoutRefusal(errors);
}

/// The order of the tensors in each rank file: the model's, or its modules' registration order.
std::vector<std::size_t> fileKeyOrder(const MergePlan& model, const SplitOptions& options)
{
    std::vector<std::size_t> keyOrder(model.tensors.size());
    std::iota(keyOrder.begin(), keyOrder.end(), 0);
    if (options.moduleOrder) {
        std::vector<std::string> names;
        for (const auto& t : model.tensors)
            names.push_back(t.name);
        keyOrder = moduleOrder(names);
    }
    return keyOrder;
}

/// How every tensor is laid out over the mesh, the same for each rank.
struct ShardedLayout {
    std::vector<Placement> placements;
    std::int64_t shards = 0;
    std::vector<std::size_t> keyOrder;
    bool fsdp = false;
};

} // namespace

std::vector<Placement> fsdpPlacements(const Shape& mesh)
{
    // FSDP2 shards dim 0 over the last mesh dim and replicates over the others (HSDP: (Replicate(), Shard(0))).
    std::vector<Placement> placements(mesh.size(), Placement::replicate());
    if (!placements.empty())
        placements.back() = Placement::shard(0);
    return placements;
}

Result<SplitTensor> fsdpRankTensor(const PlannedTensor& src, std::size_t index, const SplitPlan& plan, int rank,
                                   bool padded)
{
    SplitTensor out;
    out.globalShape = src.shape;
    out.spec.name = src.name;
    out.spec.dtype = src.dtype;
    const Shape coordinate = coordinateOf(rank, plan.mesh);
    const auto placements = fsdpPlacements(plan.mesh);
    auto local = computeLocalLayout(src.shape, plan.mesh, coordinate, placements);
    if (!local)
        return local.error().withContext(src.name);
    out.chunkOffsets = local->globalOffset;
    out.spec.shape = local->localShape;
    out.spec.dtensor = true;
    out.spec.globalShape = src.shape;
    out.spec.placements = placements;
    out.spec.mesh.shape = plan.mesh;
    out.spec.mesh.dimNames = plan.meshDimNames;
    out.spec.coordinate = coordinate;
    if (padded)
        out.spec.storageElements = fsdpPaddedElements(src.shape, plan.mesh.back());
    for (const auto& box : local->boxes)
        out.fragments.push_back({ index, box.globalOffsets, box.shape, box.localOffsets, std::nullopt, {}, {} });
    return out;
}

Result<SplitTensor> dcpRankTensor(const PlannedTensor& src, std::size_t index, const SplitPlan& plan, int rank)
{
    auto local = computeLocalLayout(src.shape, plan.mesh, coordinateOf(rank, plan.mesh), fsdpPlacements(plan.mesh));
    if (!local)
        return local.error().withContext(src.name);
    SplitTensor out;
    out.globalShape = src.shape;
    out.chunkOffsets = local->globalOffset;
    out.spec.name = src.name;
    out.spec.dtype = src.dtype;
    out.spec.shape = local->localShape;
    for (const auto& box : local->boxes)
        out.fragments.push_back({ index, box.globalOffsets, box.shape, box.localOffsets, std::nullopt, {}, {} });
    return out;
}

namespace {

/// Rank r's file: its shard of every tensor, FSDP2 DTensors in a state dict or DCP items.
Result<SplitFile> shardedRankFile(const MergePlan& model, const SplitPlan& plan, const ShardedLayout& layout, int r)
{
    SplitFile file;
    file.rank = r;
    if (layout.fsdp) {
        file.name = "model_world_size_" + std::to_string(plan.worldSize) + "_rank_" + std::to_string(r) + ".pt";
        file.kind = SplitFile::Kind::StateDict;
        file.archiveName = file.name.substr(0, file.name.size() - 3);
    } else {
        file.name = "__" + std::to_string(r) + "_0.distcp";
        file.kind = SplitFile::Kind::DcpItems;
        file.archiveName = "archive";
    }
    for (std::size_t i : layout.keyOrder) {
        const PlannedTensor& src = model.tensors[i];
        auto out = layout.fsdp ? fsdpRankTensor(src, i, plan, r, true) : dcpRankTensor(src, i, plan, r);
        TESSERA_TRY(out);
        file.bytes += out->spec.storageBytes();
        file.tensors.push_back(std::move(*out));
    }
    return file;
}

/// The plan's description, keystone and side files, its disk and memory estimates, and the empty-shard warning.
void describeShardedPlan(SplitPlan& plan, const ShardedLayout& layout, std::size_t modelTensors)
{
    if (layout.fsdp) {
        plan.layout = "FSDP2, world size " + std::to_string(plan.worldSize) + ", "
            + describePlacements(layout.placements, plan.mesh, plan.meshDimNames);
        plan.generatedFiles.emplace_back("fsdp_config.json",
                                         json2({ { "FSDP_version", 2 }, { "world_size", plan.worldSize } }));
        plan.sideFolder = "huggingface";
        plan.keystone = "fsdp_config.json";
    } else {
        plan.keystone = ".metadata";
        plan.layout = "PyTorch DCP, " + std::to_string(plan.worldSize) + " rank" + (plan.worldSize == 1 ? "" : "s")
            + ", every tensor Shard(0)";
        // .metadata is written by the engine once the item offsets are known; config files sit beside it.
        plan.diskBytes += 4096 + modelTensors * plan.worldSize * 200;
    }
    plan.diskBytes += 1u << 20; // config and tokenizer files, generously
    plan.memoryBytes = 2 * plan.largestTensorBytes + kEngineOverhead;
    if (plan.worldSize > 1) {
        std::size_t empty = 0;
        for (const auto& t : plan.files.back().tensors)
            empty += t.bytes() == 0 ? 1 : 0;
        if (empty)
            plan.warnings.push_back(std::to_string(empty) + " tensors have fewer rows than the "
                                    + std::to_string(layout.shards)
                                    + " shards: the last ranks hold empty shards of them (as FSDP2 does)");
    }
}

} // namespace

Result<SplitPlan> planShardedSplit(const MergePlan& model, const SplitOptions& options)
{
    SplitPlan plan;
    plan.format = options.format;
    TESSERA_TRY(checkSizes(options, plan.mesh, plan.meshDimNames, plan.worldSize));
    plan.runIteration = options.runIteration;
    plan.config = model.config;

    ShardedLayout layout;
    for (int r = 0; r < plan.worldSize; ++r)
        plan.meshRanks.push_back(r);
    layout.placements = fsdpPlacements(plan.mesh);
    layout.shards = plan.mesh.back();

    TESSERA_TRY(checkShardable(model, plan));
    layout.keyOrder = fileKeyOrder(model, options);
    layout.fsdp = options.format == SplitFormat::Fsdp;
    for (int r = 0; r < plan.worldSize; ++r) {
        auto file = shardedRankFile(model, plan, layout, r);
        TESSERA_TRY(file);
        plan.totalBytes += file->bytes;
        plan.diskBytes += file->bytes + file->tensors.size() * (kRecordOverhead + (layout.fsdp ? 1200 : 400)) + 4096;
        plan.files.push_back(std::move(*file));
    }
    describeShardedPlan(plan, layout, model.tensors.size());
    return plan;
}

} // namespace tessera
