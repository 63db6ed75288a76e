// SPDX-License-Identifier: GPL-3.0-or-later
// verl FSDP checkpoints: one torch.save file per rank, named model_world_size_W_rank_R.pt.

#include "model/coverage.h"
#include "formats/layouts.h"
#include "io/path_kinds.h"
#include "io/regex.h"
#include "io/text_file.h"
#include "parallel.h"
#include "pickle/saved_tensor.h"
#include "formats/layout_registry.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <mutex>
#include <set>
#include <unordered_map>

namespace fs = std::filesystem;

namespace tessera {

namespace {

struct RankFile {
    int rank = -1;
    std::string path;
    std::vector<std::pair<std::string, SavedTensor>> tensors;
    std::shared_ptr<TorchSaveFile> archive;
    std::vector<Problem> problems;
    bool readable = false;
    /// An optimizer file's state dict with its tensors replaced by placeholders (model files keep none).
    PyRef skeleton;
};

/// What a rank file holds: a model's flat state dict, or an optimizer's nested state dict.
enum class RankFileKind { Model, Optimizer };

/// Deeper than any optimizer's state dict ({"state": {i: {key: tensor}}, "param_groups": [{…}]}) by far.
constexpr int kMaxOptimizerNesting = 32;

/// `value` with every tensor replaced by a placeholder (PyValue::Kind::Tensor, `integer` its index in
/// `rank.tensors`), each tensor named by its path ("state.0.exp_avg"). Containers are copied; scalars shared.
Result<PyRef> optimizerSkeleton(const PyRef& value, const std::string& path, RankFile& rank, int depth)
{
    if (depth > kMaxOptimizerNesting)
        return makeError("the optimizer state nests deeper than " + std::to_string(kMaxOptimizerNesting) + " levels");
    auto copy = std::make_shared<PyValue>();
    copy->kind = value ? value->kind : PyValue::Kind::None;
    auto at = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
    if (!value)
        return copy;
    if (value->kind == PyValue::Kind::Dict) {
        for (const auto& [key, item] : value->entries) {
            const std::string name = key && key->isStr() ? key->text : key && key->isInt() ? std::to_string(key->integer)
                                                                                            : key ? key->repr(1) : "None";
            auto child = optimizerSkeleton(item, at(name), rank, depth + 1);
            TESSERA_TRY(child);
            copy->entries.emplace_back(key, std::move(*child));
        }
        return copy;
    }
    if (value->isSequence()) {
        for (std::size_t i = 0; i < value->items.size(); ++i) {
            auto child = optimizerSkeleton(value->items[i], at(std::to_string(i)), rank, depth + 1);
            TESSERA_TRY(child);
            copy->items.push_back(std::move(*child));
        }
        return copy;
    }
    auto saved = interpretSavedTensor(value, *rank.archive);
    if (!saved)
        return saved.error().withContext(path);
    if (!saved->has_value())
        return value;
    copy->kind = PyValue::Kind::Tensor;
    copy->integer = static_cast<std::int64_t>(rank.tensors.size());
    rank.tensors.emplace_back(path, std::move(**saved));
    return copy;
}

/// Reads one rank's file into SavedTensors; problems are recorded, never thrown.
void readRankFile(RankFile& rank, RankFileKind kind)
{
    auto archive = TorchSaveFile::open(rank.path);
    if (!archive) {
        rank.problems.push_back({ rank.path, "", archive.error().message });
        return;
    }
    rank.archive = std::make_shared<TorchSaveFile>(std::move(*archive));
    const auto& root = rank.archive->root();
    if (!root || root->kind != PyValue::Kind::Dict) {
        rank.problems.push_back({ rank.path, "", std::string("the file does not hold ")
                                                     + (kind == RankFileKind::Model ? "a state dict" : "an optimizer's state dict")
                                                     + " (found " + (root ? root->repr(1) : std::string("nothing")) + ")" });
        return;
    }
    if (kind == RankFileKind::Optimizer) {
        auto skeleton = optimizerSkeleton(root, "", rank, 0);
        if (!skeleton) {
            rank.problems.push_back({ rank.path, "", skeleton.error().message });
            return;
        }
        rank.skeleton = std::move(*skeleton);
    } else {
        for (auto& [name, value] : stateDictItems(root)) {
            auto saved = interpretSavedTensor(value, *rank.archive);
            if (!saved) {
                rank.problems.push_back({ rank.path, name, saved.error().message });
                continue;
            }
            if (saved->has_value())
                rank.tensors.emplace_back(name, std::move(**saved));
        }
    }
    // The pickle tree is many times the size of the file's data.pkl; keep only the interpreted tensors.
    rank.archive->dropPickle();
    rank.readable = true;
}

/// This file's coordinate in the mesh: recorded by torch ≥2.2, else found from the rank layout.
Shape coordinateOf(const SavedTensor& t, int rank)
{
    if (!t.coordinate.empty())
        return t.coordinate;
    for (std::size_t i = 0; i < t.mesh.ranks.size(); ++i)
        if (t.mesh.ranks[i] == rank) {
            Shape coord(t.mesh.shape.size());
            std::size_t rest = i;
            for (std::size_t k = coord.size(); k-- > 0;) {
                coord[k] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(t.mesh.shape[k]));
                rest /= static_cast<std::size_t>(t.mesh.shape[k]);
            }
            return coord;
        }
    return {};
}

/// Adds the pieces one rank holds of `info`.
void addPieces(TensorInfo& info, const SavedTensor& t, const RankFile& rank, bool firstHolder,
               std::vector<Problem>& problems)
{
    auto fail = [&](const std::string& message) { problems.push_back({ rank.path, info.name, message }); };
    auto addPiece = [&](const TensorRef& local, const Shape& offsets, const Shape& localOffsets, const Shape& shape,
                        PieceRole role) {
        auto piece = rank.archive->piece(local, offsets, localOffsets, shape);
        if (!piece) {
            fail(piece.error().message);
            return;
        }
        piece->rank = rank.rank;
        piece->role = role;
        info.pieces.push_back(std::move(*piece));
    };
    switch (t.kind) {
    case SavedTensor::Kind::Plain:
        // A plain tensor in a multi-rank checkpoint is a replica on every rank, never a shard.
        addPiece(t.local, Shape(t.local.shape.size(), 0), {}, t.local.shape,
                 firstHolder ? PieceRole::Primary : PieceRole::Replica);
        break;
    case SavedTensor::Kind::DTensor: {
        const Shape coord = coordinateOf(t, rank.rank);
        if (coord.empty()) {
            fail("rank " + std::to_string(rank.rank) + " is not in the tensor's device mesh");
            return;
        }
        auto layout = computeLocalLayout(t.globalShape, t.mesh.shape, coord, t.placements);
        if (!layout) {
            fail(layout.error().message);
            return;
        }
        if (layout->localShape != t.local.shape) {
            fail("the local shard has shape " + shapeToString(t.local.shape) + " but its placements "
                 + describeSavedPlacement(t) + " give " + shapeToString(layout->localShape) + " for mesh coordinate "
                 + shapeToString(coord));
            return;
        }
        const PieceRole role = layout->isReplica ? PieceRole::Replica
            : layout->isPartial                  ? PieceRole::PartialTerm
                                                 : PieceRole::Primary;
        for (const auto& box : layout->boxes)
            addPiece(t.local, box.globalOffsets, box.localOffsets, box.shape, role);
        break;
    }
    case SavedTensor::Kind::ShardedTensor:
        for (const auto& shard : t.shards)
            addPiece(shard.tensor, shard.offsets, {}, shard.tensor.shape, PieceRole::Primary);
        break;
    }
}

/// A DTensor on a sub-mesh (e.g. FSDP's "dp" mesh inside a dp × tp run) is replicated over the other mesh
/// dims: files on other sub-meshes hold the same boxes. A Primary piece whose box a piece from a different
/// sub-mesh already provides is such a replica. Identical boxes from the same mesh stay Primary, so that
/// coverage checks still report them as overlaps.
void markReplicasAcrossSubmeshes(TensorInfo& tensor, std::size_t firstNew, const SavedTensor& saved,
                                 std::map<std::pair<Shape, Shape>, std::vector<std::int64_t>>& primaryMeshes)
{
    if (saved.kind != SavedTensor::Kind::DTensor)
        return;
    for (std::size_t i = firstNew; i < tensor.pieces.size(); ++i) {
        Piece& piece = tensor.pieces[i];
        if (piece.role != PieceRole::Primary)
            continue;
        auto [it, inserted] = primaryMeshes.emplace(std::make_pair(piece.offsets, piece.shape), saved.mesh.ranks);
        if (!inserted && it->second != saved.mesh.ranks)
            piece.role = PieceRole::Replica;
    }
}

/// Largest world size Tessera accepts from a file: far beyond any training run, small enough for int arithmetic.
constexpr std::int64_t kMaxWorldSize = 1 << 20;

/// A world size or rank from a file name; nullopt when it does not fit (model_world_size_99999999999_rank_0.pt).
std::optional<std::int64_t> parseRankNumber(const std::string& digits)
{
    if (digits.empty() || digits.size() > 9)
        return std::nullopt;
    const std::int64_t n = std::strtoll(digits.c_str(), nullptr, 10);
    return n <= kMaxWorldSize ? std::optional<std::int64_t>(n) : std::nullopt;
}

/// The rank files present: file path by world size, then rank.
using RankFilesByWorld = std::map<std::int64_t, std::map<std::int64_t, std::string>>;

/// The file name stem of rank files of `kind`: "model" or "optim" (…_world_size_W_rank_R.pt).
const char* rankFileStem(RankFileKind kind) { return kind == RankFileKind::Model ? "model" : "optim"; }

/// The STEM_world_size_W_rank_R.pt files in `dir`; a name whose numbers are out of range is reported and left out.
Result<RankFilesByWorld> listRankFiles(const std::string& dir, CheckpointInfo& info, RankFileKind kind)
{
    static const Regex model = Regex::fixed(R"(model_world_size_(\d+)_rank_(\d+)\.pt)");
    static const Regex optimizer = Regex::fixed(R"(optim_world_size_(\d+)_rank_(\d+)\.pt)");
    const Regex& pattern = kind == RankFileKind::Model ? model : optimizer;
    RankFilesByWorld byWorld;
    std::error_code ec;
    for (const auto& entry : folderEntries(dir, ec)) {
        std::vector<std::string> m;
        const std::string name = entry.path().filename().string();
        if (!pattern.fullMatch(name, m))
            continue;
        const auto world = parseRankNumber(m[0]);
        const auto rank = parseRankNumber(m[1]);
        if (!world || !rank || *world < 1 || *rank >= *world) {
            info.problems.push_back({ entry.path().string(), "", "the world size or rank in this file name is out of "
                                                                 "range; the file is left out" });
            continue;
        }
        byWorld[*world][*rank] = entry.path().string();
    }
    if (byWorld.empty())
        return makeError(dir + ": no " + rankFileStem(kind) + "_world_size_W_rank_R.pt files");
    return byWorld;
}

/// fsdp_config.json, when present (verl ≥ mid-2025): its world_size replaces `world`, its FSDP_version becomes a
/// note. A file that cannot be read leaves `world` as the file names give it; a world size out of range is an error.
Status readFsdpConfig(const fs::path& configPath, std::int64_t& world, CheckpointInfo& info)
{
    std::error_code ec;
    if (!fs::exists(configPath, ec))
        return Status::success();
    const auto text = readTextFile(configPath.string());
    const auto config = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    if (!text) {
        info.problems.push_back({ configPath.string(), "", text.error().message
                                                               + "; the world size is taken from the file names" });
    } else if (config.is_discarded() || !config.is_object()) {
        info.problems.push_back({ configPath.string(), "", "not valid JSON; the world size is taken from the file names" });
    } else {
        if (auto it = config.find("world_size"); it != config.end() && it->is_number_integer()) {
            // Read as the JSON number it is: get<int> would turn 4294967300 into 4.
            const bool inRange = it->is_number_unsigned()
                ? it->get<std::uint64_t>() >= 1 && it->get<std::uint64_t>() <= kMaxWorldSize
                : it->get<std::int64_t>() >= 1 && it->get<std::int64_t>() <= kMaxWorldSize;
            if (!inRange)
                return makeError(configPath.string() + ": world_size is " + it->dump()
                                 + ", which is not a world size (1 to " + std::to_string(kMaxWorldSize) + ")");
            world = it->get<std::int64_t>();
        }
        if (auto it = config.find("FSDP_version"); it != config.end() && it->is_primitive())
            // Never a nested value (dump() recurses per level); bytes that are not UTF-8 are replaced, not thrown on.
            info.notes["fsdp_version"] = it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    return Status::success();
}

/// Which world size: fsdp_config.json when present, else the largest in the file names; an error when no files
/// are of that size, or far too few of them to be a run.
Result<std::int64_t> chooseWorldSize(const std::string& dir, const RankFilesByWorld& byWorld, CheckpointInfo& info)
{
    std::int64_t world = byWorld.rbegin()->first;
    const fs::path configPath = fs::path(dir) / "fsdp_config.json";
    TESSERA_TRY(readFsdpConfig(configPath, world, info));
    if (byWorld.size() > 1)
        info.problems.push_back({ info.root, "", "files of several world sizes are present; reading world size "
                                                    + std::to_string(world) });
    if (!byWorld.count(world))
        return makeError(configPath.string() + ": says world_size " + std::to_string(world)
                         + " but there are no model_world_size_" + std::to_string(world) + "_rank_*.pt files");
    // Every rank gets a slot below; a world size far beyond the files present is a damaged name, not a run whose
    // ranks are nearly all missing, and must not size that allocation.
    if (static_cast<std::uint64_t>(world) > 16 * static_cast<std::uint64_t>(byWorld.at(world).size()) + 64)
        return makeError(dir + ": the file names claim world size " + std::to_string(world) + " but only "
                         + std::to_string(byWorld.at(world).size()) + " of its rank files are present");
    return world;
}

/// One slot per rank of the world, with its file's path; each rank without a file is reported missing.
std::vector<RankFile> rankSlots(const std::string& dir, const std::map<std::int64_t, std::string>& files,
                                std::int64_t world, CheckpointInfo& info, RankFileKind kind)
{
    std::vector<RankFile> ranks(static_cast<std::size_t>(world));
    for (int r = 0; r < static_cast<int>(world); ++r) {
        ranks[static_cast<std::size_t>(r)].rank = r;
        auto it = files.find(r);
        if (it == files.end()) {
            const std::string missing = (fs::path(dir) / (rankFileStem(kind) + ("_world_size_" + std::to_string(world)) + "_rank_"
                                                          + std::to_string(r) + ".pt")).string();
            info.problems.push_back({ missing, "", "rank " + std::to_string(r) + " of " + std::to_string(world)
                                                      + " is missing" });
        } else {
            ranks[static_cast<std::size_t>(r)].path = absoluteNormal(it->second).string();
            info.files.push_back(ranks[static_cast<std::size_t>(r)].path);
        }
    }
    return ranks;
}

/// Reads every rank's file on the pickle readers, then lists their problems in rank order.
Status readRankFiles(std::vector<RankFile>& ranks, int threads, Progress& progress, CheckpointInfo& info,
                     RankFileKind kind)
{
    std::atomic<std::uint64_t> done { 0 };
    std::mutex progressMutex;
    parallelFor(ranks.size(), resolvePickleReaders(threads), [&](std::size_t i) {
        if (ranks[i].path.empty() || progress.isCanceled())
            return;
        readRankFile(ranks[i], kind);
        std::lock_guard<std::mutex> lock(progressMutex);
        progress.report(++done, ranks.size(), ranks[i].path);
    });
    if (progress.isCanceled())
        return canceledError();
    for (auto& rank : ranks)
        for (auto& p : rank.problems)
            info.problems.push_back(std::move(p));
    return Status::success();
}

/// The ranks holding one tensor, each with its saved tensor, in rank order.
using TensorHolders = std::vector<std::pair<int, const SavedTensor*>>;

/// Every tensor's name and holders. Tensor order: rank 0's key order, then keys only other ranks have.
struct GatheredTensors {
    std::vector<std::string> order;
    std::vector<TensorHolders> holders;
};

GatheredTensors gatherTensors(const std::vector<RankFile>& ranks)
{
    GatheredTensors gathered;
    std::unordered_map<std::string, std::size_t> index;
    for (const auto& rank : ranks)
        for (const auto& [name, saved] : rank.tensors) {
            auto [it, inserted] = index.emplace(name, gathered.order.size());
            if (inserted) {
                gathered.order.push_back(name);
                gathered.holders.emplace_back();
            }
            gathered.holders[it->second].emplace_back(rank.rank, &saved);
        }
    return gathered;
}

/// The tensor's dtype, global shape and placement as its first holder saved it; a DTensor's mesh joins the
/// checkpoint's list of meshes.
TensorInfo describeTensor(const std::string& name, const SavedTensor& first, CheckpointInfo& info)
{
    TensorInfo tensor;
    tensor.name = name;
    tensor.dtype = first.dtype;
    tensor.shape = first.globalShape;
    tensor.placement = describeSavedPlacement(first);
    if (first.kind == SavedTensor::Kind::DTensor) {
        auto it = std::find(info.parallel.meshes.begin(), info.parallel.meshes.end(), first.mesh);
        tensor.meshIndex = static_cast<int>(it - info.parallel.meshes.begin());
        if (it == info.parallel.meshes.end())
            info.parallel.meshes.push_back(first.mesh);
    }
    return tensor;
}

/// "1, 3": the readable ranks that do not hold the tensor.
std::string ranksWithout(const std::vector<RankFile>& ranks, const TensorHolders& holders)
{
    std::string missingOn;
    for (const auto& rank : ranks) {
        if (!rank.readable)
            continue;
        bool has = false;
        for (const auto& h : holders)
            has |= h.first == rank.rank;
        if (!has)
            missingOn += (missingOn.empty() ? "" : ", ") + std::to_string(rank.rank);
    }
    return missingOn;
}

/// The pieces of every holder that agrees with the first on dtype, global shape and kind.
void addHolderPieces(TensorInfo& tensor, const TensorHolders& holders, const std::vector<RankFile>& ranks,
                     CheckpointInfo& info)
{
    const auto& [firstRank, first] = holders.front();
    bool firstHolder = true;
    std::map<std::pair<Shape, Shape>, std::vector<std::int64_t>> primaryMeshes;
    for (const auto& [r, saved] : holders) {
        const auto& rank = ranks[static_cast<std::size_t>(r)];
        if (saved->dtype != tensor.dtype || saved->globalShape != tensor.shape || saved->kind != first->kind) {
            info.problems.push_back({ rank.path, tensor.name,
                "rank " + std::to_string(r) + " has " + std::string(torchName(saved->dtype)) + " "
                    + shapeToString(saved->globalShape) + " but rank " + std::to_string(firstRank) + " has "
                    + std::string(torchName(tensor.dtype)) + " " + shapeToString(tensor.shape) });
            continue;
        }
        const std::size_t before = tensor.pieces.size();
        addPieces(tensor, *saved, rank, firstHolder, info.problems);
        markReplicasAcrossSubmeshes(tensor, before, *saved, primaryMeshes);
        firstHolder = false;
    }
}

/// Every tensor the ranks hold, placed, with what is missing or does not fit reported per tensor.
void placeTensors(const std::vector<RankFile>& ranks, std::int64_t world, CheckpointInfo& info)
{
    const GatheredTensors gathered = gatherTensors(ranks);
    int readableRanks = 0;
    for (const auto& rank : ranks)
        readableRanks += rank.readable ? 1 : 0;
    std::string unreadable;
    for (const auto& rank : ranks)
        if (!rank.readable)
            unreadable += (unreadable.empty() ? "" : ", ") + std::to_string(rank.rank);
    unreadable = "the file of rank " + unreadable + " could not be read";
    for (std::size_t i = 0; i < gathered.order.size(); ++i) {
        const TensorHolders& holders = gathered.holders[i];
        TensorInfo tensor = describeTensor(gathered.order[i], *holders.front().second, info);
        if (static_cast<int>(holders.size()) < readableRanks)
            info.problems.push_back({ info.root, tensor.name, "missing on rank(s) " + ranksWithout(ranks, holders) });
        addHolderPieces(tensor, holders, ranks, info);
        if (readableRanks == static_cast<int>(world)) {
            for (const auto& message : checkCoverage(tensor))
                info.problems.push_back({ info.root, tensor.name, message });
        } else if (const std::string gap = checkGaps(tensor); !gap.empty()) {
            // The unreadable files are reported once; each tensor they leave with holes says so too, so a view
            // of the tensors (and a count of problems) shows every one a merge would refuse.
            info.problems.push_back({ info.root, tensor.name, "incomplete: " + gap + " (" + unreadable + ")" });
        }
        info.tensors.push_back(std::move(tensor));
    }
}

/// The TP size, when every DTensor lives on one mesh that has a "tp" dim.
void setTensorParallelFromMesh(CheckpointInfo& info)
{
    if (info.parallel.meshes.size() == 1) {
        const auto& mesh = info.parallel.meshes.front();
        for (std::size_t d = 0; d < mesh.shape.size(); ++d) {
            const std::string dimName = d < mesh.dimNames.size() ? mesh.dimNames[d] : "";
            if (dimName == "tp")
                info.parallel.tensorParallel = static_cast<int>(mesh.shape[d]);
        }
    }
}

} // namespace

Result<CheckpointInfo> scanVerlFsdp(const std::string& dir, int threads, Progress& progress)
{
    CheckpointInfo info;
    info.layout = layout_names::kVerlFsdp;
    info.root = absoluteNormal(dir).string();
    auto byWorld = listRankFiles(dir, info, RankFileKind::Model);
    TESSERA_TRY(byWorld);
    auto world = chooseWorldSize(dir, *byWorld, info);
    TESSERA_TRY(world);
    std::vector<RankFile> ranks = rankSlots(dir, byWorld->at(*world), *world, info, RankFileKind::Model);
    TESSERA_TRY(readRankFiles(ranks, threads, progress, info, RankFileKind::Model));
    placeTensors(ranks, *world, info);
    info.parallel.worldSize = static_cast<int>(*world);
    setTensorParallelFromMesh(info);
    return info;
}

Result<CheckpointInfo> scanTorchSaveFile(const std::string& path)
{
    CheckpointInfo info;
    info.layout = layout_names::kTorchSave;
    info.root = absoluteNormal(path).string();
    RankFile rank;
    rank.rank = 0;
    rank.path = info.root;
    readRankFile(rank, RankFileKind::Model);
    if (!rank.readable) {
        if (rank.problems.empty())
            return makeError(path + ": unreadable");
        return makeError(rank.problems.front().text());
    }
    info.files.push_back(rank.path);
    info.parallel.worldSize = 1;
    info.problems = rank.problems;
    for (const auto& [name, saved] : rank.tensors) {
        TensorInfo tensor;
        tensor.name = name;
        tensor.dtype = saved.dtype;
        tensor.shape = saved.globalShape;
        tensor.placement = describeSavedPlacement(saved);
        addPieces(tensor, saved, rank, true, info.problems);
        info.tensors.push_back(std::move(tensor));
    }
    return info;
}

Result<OptimizerFiles> scanVerlFsdpOptimizer(const std::string& dir, std::int64_t world, int threads,
                                             Progress& progress)
{
    OptimizerFiles out;
    CheckpointInfo& info = out.info;
    info.layout = layout_names::kVerlFsdp;
    info.root = absoluteNormal(dir).string();
    auto byWorld = listRankFiles(dir, info, RankFileKind::Optimizer);
    TESSERA_TRY(byWorld);
    for (const auto& [otherWorld, files] : *byWorld)
        if (otherWorld != world)
            info.problems.push_back({ info.root, "", std::to_string(files.size()) + " optimizer file(s) of world size "
                                                         + std::to_string(otherWorld) + " are beside the model's world size "
                                                         + std::to_string(world) + "; they are not read" });
    const auto own = byWorld->find(world);
    std::vector<RankFile> ranks = rankSlots(dir, own == byWorld->end() ? std::map<std::int64_t, std::string> {} : own->second,
                                            world, info, RankFileKind::Optimizer);
    TESSERA_TRY(readRankFiles(ranks, threads, progress, info, RankFileKind::Optimizer));
    for (const auto& rank : ranks) {
        if (!rank.readable || !ranks.front().readable || rank.rank == 0)
            continue;
        const auto& first = ranks.front();
        bool sameNames = rank.tensors.size() == first.tensors.size();
        for (std::size_t i = 0; sameNames && i < rank.tensors.size(); ++i)
            sameNames = rank.tensors[i].first == first.tensors[i].first;
        if (!sameNames || !sameValue(rank.skeleton, first.skeleton))
            info.problems.push_back({ rank.path, "", "the optimizer state of rank " + std::to_string(rank.rank)
                                                         + " is not laid out as rank 0's (other parameters, state "
                                                           "entries or hyper-parameters)" });
    }
    placeTensors(ranks, world, info);
    info.parallel.worldSize = static_cast<int>(world);
    out.skeleton = ranks.front().skeleton;
    return out;
}

} // namespace tessera
