// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron per-rank checkpoints: one folder per model-parallel rank, mp_rank_TT[_PPP][_EEE], holding verl's
// legacy model.pt (a list of state dicts, one per virtual pipeline stage) or Megatron-LM's model_optim_rng.pt
// (a dict with `model` or `model0`, `model1`…, and `args`). Every file holds raw per-rank slices with local
// layer and expert numbers; this reader turns them into global tensors with placed pieces. Reading one folder's
// file is megatron_rank_folder's job, telling which number in a folder name is which rank megatron_grid's.

#include "model/coverage.h"
#include "formats/layouts.h"
#include "formats/megatron_config.h"
#include "formats/megatron_grid.h"
#include "formats/megatron_names.h"
#include "formats/megatron_rank_folder.h"
#include "io/path_kinds.h"
#include "io/regular_file.h"
#include "io/regex.h"
#include "parallel.h"
#include "formats/layout_registry.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// Layer counts per (pipeline stage, virtual stage) as the files hold them: highest local layer number + 1.
struct StageLayers {
    std::optional<std::int64_t> count;
    std::string file; ///< a file that holds this stage, for messages
};

/// One file's slice of a global tensor.
struct Holder {
    const MegatronRankFolder* folder;
    const TensorRef* tensor;
};

/// A global tensor and every slice of it the files hold, in Megatron's layer order.
struct Gathered {
    std::string name;
    bool expert = false;
    std::vector<Holder> holders;
};

/// Shape disagreements with the config, reported once per parameter, not once per layer:
/// "key\nmessage" → (first tensor, count).
using ShapeMismatches = std::map<std::string, std::pair<std::string, int>>;

/// The global shape and placement of a tensor whose per-rank slice is `local`; returns why it cannot be split,
/// empty when it can.
std::string splitGlobalShape(TensorInfo& tensor, MegatronTpSplit split, const Shape& local, int tpSize)
{
    tensor.shape = local;
    std::string why;
    switch (split) {
    case MegatronTpSplit::Replicated:
        tensor.placement = tpSize > 1 ? "replicated over TP=" + std::to_string(tpSize) : "";
        break;
    case MegatronTpSplit::Rows:
        if (local.empty())
            why = "a 0-dim tensor cannot be split over TP ranks";
        else
            tensor.shape[0] *= tpSize;
        tensor.placement = "rows split over TP=" + std::to_string(tpSize);
        break;
    case MegatronTpSplit::Columns:
        if (local.size() < 2)
            why = "a row-parallel weight needs 2 dims, it has " + std::to_string(local.size());
        else
            tensor.shape[1] *= tpSize;
        tensor.placement = "columns split over TP=" + std::to_string(tpSize);
        break;
    case MegatronTpSplit::GluRows:
        if (local.empty() || local[0] % 2 != 0)
            why = "a gated linear_fc1 slice needs an even number of rows ([gate; up]), it has shape "
                  + shapeToString(local);
        else
            tensor.shape[0] *= tpSize;
        tensor.placement = "[gate; up] halves split over TP=" + std::to_string(tpSize);
        break;
    }
    return why;
}

/// One scan of a folder of mp_rank_* folders: the state its steps build up, each step a method, run in order by
/// scanMegatronPerRank. `cells` and the holders point into `folders`, which does not change once read.
struct PerRankScan {
    CheckpointInfo info;
    std::vector<MegatronRankFolder> folders;
    MegatronConfig config;
    MegatronGridShape grid;
    std::vector<MegatronRankFolder*> cells; ///< one slot per grid cell, see cell()
    bool complete = true;                   ///< every cell has a readable file holding every model chunk
    int vpp = 1;
    std::vector<std::vector<std::optional<std::int64_t>>> layerOffsets; ///< [pp][vp] → first global layer
    std::int64_t localExperts = 0;
    bool expertsReplicatedOverTp = false;
    bool sawFc1 = false;
    bool gated = false;
    std::vector<Gathered> gathered;

    explicit PerRankScan(const std::string& dir) { info.root = absoluteNormal(dir).string(); }

    /// The slot of a rank in `cells`: Megatron's default tp-ep-pp order.
    std::size_t cell(int tp, int pp, int ep) const
    {
        return (static_cast<std::size_t>(pp) * grid.ep + ep) * grid.tp + tp;
    }
    std::string rankText(int tp, int pp, int ep) const;

    Status listRankFolders();
    void findRankFiles();
    Status readRankFolders(int threads, Progress& progress);
    void loadConfig();
    bool resolveSizes();
    void placeFolders();
    void checkMissingRanks();
    void countVirtualStages();
    std::vector<std::vector<StageLayers>> countStageLayers();
    void numberLayers();
    void countLocalExperts();
    void gatherTensors();
    void gatherChunk(const MegatronRankFolder& f, int vp, int ep, const std::optional<std::int64_t>& offset,
                     std::unordered_map<std::string, std::size_t>& index);
    void checkModelKind();
    void placeTensors();
    void placeTensor(const Gathered& g, ShapeMismatches& shapeMismatches);
    MegatronTpSplit tpSplitOf(const Gathered& g, const Shape& local) const;
    void addPieces(TensorInfo& tensor, const Gathered& g, MegatronTpSplit split, const Shape& local);
    void addHolderPieces(TensorInfo& tensor, const Holder& h, MegatronTpSplit split, const Shape& local,
                         PieceRole role);
    void checkTensorCoverage(const TensorInfo& tensor);
    void recordShapeMismatch(const TensorInfo& tensor, MegatronTpSplit split, const Shape& local,
                             ShapeMismatches& shapeMismatches) const;
    void reportShapeMismatches(const ShapeMismatches& shapeMismatches);
};

/// The mp_rank_* folders under the root, sorted by name; folders whose rank numbers do not fit are left out.
Status PerRankScan::listRankFolders()
{
    static const Regex folderPattern = Regex::fixed(R"(mp_rank_(\d{2,})(?:_(\d{3,}))?(?:_(\d{3,}))?)");
    std::error_code ec;
    for (const auto& entry : folderEntries(info.root, ec)) {
        std::vector<std::string> m;
        const std::string name = entry.path().filename().string();
        if (!entry.is_directory(ec) || !folderPattern.fullMatch(name, m))
            continue;
        MegatronRankFolder f;
        f.folderName = name;
        f.dir = entry.path().string();
        bool inRange = true;
        for (const std::string& digits : m)
            if (!digits.empty()) { // an optional number that is there
                // Six digits is a million ranks; longer numbers are damage and would not fit an int.
                inRange &= digits.size() <= 6;
                f.numbers.push_back(inRange ? std::strtoll(digits.c_str(), nullptr, 10) : 0);
            }
        if (!inRange) {
            info.problems.push_back({ f.dir, "", "the rank numbers in this folder name are out of range; the folder "
                                                 "is left out" });
            continue;
        }
        folders.push_back(std::move(f));
    }
    if (folders.empty())
        return makeError(info.root + ": no mp_rank_* folders");
    std::sort(folders.begin(), folders.end(),
              [](const MegatronRankFolder& a, const MegatronRankFolder& b) { return a.folderName < b.folderName; });
    return Status::success();
}

/// Which file: verl's model.pt or Megatron-LM's model_optim_rng.pt; the more common one names the layout.
void PerRankScan::findRankFiles()
{
    std::error_code ec;
    int legacyFiles = 0, lmFiles = 0;
    for (auto& f : folders) {
        for (const char* file : { "model.pt", "model_optim_rng.pt" }) {
            const fs::path p = fs::path(f.dir) / file;
            if (fs::is_regular_file(p, ec)) {
                f.path = p.string();
                (std::string(file) == "model.pt" ? legacyFiles : lmFiles)++;
                break;
            }
        }
        if (f.path.empty()) {
            // A FIFO, device or folder under the rank file's name is named for what it is, not taken as absent.
            std::string present;
            for (const char* file : { "model.pt", "model_optim_rng.pt" })
                if (const fs::path p = fs::path(f.dir) / file; present.empty() && fs::exists(fs::symlink_status(p, ec)))
                    present = p.string();
            if (!present.empty())
                info.problems.push_back({ present, "", "is " + describeFileKind(present)
                                                           + ", not a regular file; it cannot be read as a rank file" });
            else
                info.problems.push_back({ f.dir, "", "no model.pt or model_optim_rng.pt in this folder" });
        }
    }
    info.layout = legacyFiles >= lmFiles ? layout_names::kMegatronLegacy : layout_names::kMegatronLm;
    if (legacyFiles && lmFiles)
        info.problems.push_back({ info.root, "", "some folders hold model.pt and others model_optim_rng.pt; they "
                                                 "come from different checkpoints" });
}

/// Reads every folder's file on the pickle readers, then lists the files and their problems in folder order.
Status PerRankScan::readRankFolders(int threads, Progress& progress)
{
    std::atomic<std::size_t> done { 0 };
    std::mutex progressMutex;
    parallelFor(folders.size(), resolvePickleReaders(threads), [&](std::size_t i) {
        if (folders[i].path.empty() || progress.isCanceled())
            return;
        readMegatronRankFolder(folders[i]);
        std::lock_guard<std::mutex> lock(progressMutex);
        progress.report(++done, folders.size(), folders[i].path);
    });
    if (progress.isCanceled())
        return canceledError();
    for (auto& f : folders) {
        if (!f.path.empty())
            info.files.push_back(f.path);
        for (auto& p : f.problems)
            info.problems.push_back(std::move(p));
        f.problems.clear();
    }
    return Status::success();
}

/// The sizes: transformer_config.json first (verl), then args (Megatron-LM), then the folder names.
void PerRankScan::loadConfig()
{
    config = loadTransformerConfig(info);
    for (const auto& f : folders)
        if (f.readable && f.args) {
            const std::string source = "args in " + f.folderName + "/" + fs::path(f.path).filename().string();
            for (auto& conflict : config.mergeFrom(megatronConfigFromArgs(f.args, source)))
                info.problems.push_back({ f.path, "", conflict });
            break;
        }
}

/// Decides the grid from the folder names and the config; false (with the problem recorded) when nothing tells
/// which number is which, or the sizes cannot be right.
bool PerRankScan::resolveSizes()
{
    auto resolved = resolveMegatronGrid(folders, config, info.problems, info.root);
    if (!resolved) {
        info.problems.push_back({ info.root, "", resolved.error().message });
        return false;
    }
    grid = *resolved;
    // Every cell of the grid gets a slot below, so its size must come from the folders present, not from what a
    // config claims (TP=65536 × PP=65537 in 724 bytes of args overflows an int and any allocation).
    const std::uint64_t gridCells = std::uint64_t(grid.tp) * std::uint64_t(grid.pp) * std::uint64_t(grid.ep);
    if (gridCells > 8 * folders.size() + 64) {
        info.problems.push_back({ info.root, "", "the parallel sizes (" + config.tensorParallel.describe("tensor_model_parallel_size")
                                                     + ", " + config.pipelineParallel.describe("pipeline_model_parallel_size")
                                                     + ", " + config.expertParallel.describe("expert_model_parallel_size")
                                                     + ") make " + std::to_string(gridCells) + " ranks, but only "
                                                     + std::to_string(folders.size())
                                                     + " mp_rank_* folders are present; the sizes cannot be right" });
        return false;
    }
    info.parallel.tensorParallel = grid.tp;
    info.parallel.pipelineParallel = grid.pp;
    info.parallel.expertParallel = grid.ep;
    info.parallel.worldSize = static_cast<int>(gridCells);
    return true;
}

/// Places folders in the (tp, pp, ep) grid; folders outside the configured sizes are reported and left out.
void PerRankScan::placeFolders()
{
    cells.assign(static_cast<std::size_t>(info.parallel.worldSize), nullptr);
    for (auto& f : folders) {
        std::string outside;
        if (f.tp >= grid.tp)
            outside = "TP rank " + std::to_string(f.tp) + " but " + config.tensorParallel.describe("tensor_model_parallel_size");
        else if (f.pp >= grid.pp)
            outside = "pipeline stage " + std::to_string(f.pp) + " but "
                      + config.pipelineParallel.describe("pipeline_model_parallel_size");
        else if (f.ep >= grid.ep)
            outside = "expert rank " + std::to_string(f.ep) + " but "
                      + config.expertParallel.describe("expert_model_parallel_size");
        if (!outside.empty()) {
            info.problems.push_back({ f.dir, "", "this folder is for " + outside + "; it is left out" });
            continue;
        }
        cells[cell(f.tp, f.pp, f.ep)] = &f;
    }
}

/// "TP rank 0 of 2, pipeline stage 1 of 2": a grid cell as the messages name it.
std::string PerRankScan::rankText(int tp, int pp, int ep) const
{
    std::string s = "TP rank " + std::to_string(tp) + " of " + std::to_string(grid.tp);
    if (grid.pp > 1)
        s += ", pipeline stage " + std::to_string(pp) + " of " + std::to_string(grid.pp);
    if (grid.ep > 1)
        s += ", expert rank " + std::to_string(ep) + " of " + std::to_string(grid.ep);
    return s;
}

/// Reports each grid cell without a folder, and the patterns of missing folders that have a known cause.
void PerRankScan::checkMissingRanks()
{
    std::set<int> tpRanksSeen;
    int missingExpertRankFolders = 0, missingFolders = 0;
    for (int pp = 0; pp < grid.pp; ++pp)
        for (int ep = 0; ep < grid.ep; ++ep)
            for (int tp = 0; tp < grid.tp; ++tp) {
                MegatronRankFolder* f = cells[cell(tp, pp, ep)];
                if (f)
                    tpRanksSeen.insert(tp);
                if (!f) {
                    ++missingFolders;
                    missingExpertRankFolders += ep > 0 ? 1 : 0;
                    const std::string name = megatronRankFolderName(tp, pp, ep, grid.namesHavePp, grid.namesHaveEp);
                    info.problems.push_back({ (fs::path(info.root) / name).string(), "",
                                              "missing: no folder for " + rankText(tp, pp, ep)
                                                  + ", so the tensors it holds are absent" });
                    complete = false;
                } else if (!f->readable) {
                    complete = false;
                }
            }
    // verl's legacy saver writes only from data-parallel rank 0, which with expert parallelism is expert rank 0:
    // its checkpoints have the _000 expert folders and nothing else.
    if (missingFolders > 0 && missingFolders == missingExpertRankFolders)
        info.problems.push_back({ info.root, "", "only the expert rank 0 folders are present, so the experts of the other "
                                                 + std::to_string(grid.ep - 1) + " expert rank(s) are absent; verl's "
                                                 "legacy Megatron saver writes only those when expert parallelism is "
                                                 "on (save with dist checkpointing to keep every expert)" });
    if (static_cast<int>(tpRanksSeen.size()) < grid.tp && !tpRanksSeen.empty())
        info.problems.push_back({ info.root, "", "only " + std::to_string(tpRanksSeen.size()) + " TP rank(s) have "
                                                     "folders but " + config.tensorParallel.describe("tensor_model_parallel_size")
                                                     + "; is that size right?" });
}

/// Virtual pipeline stages: the number of state dicts per file, which every file must agree on.
void PerRankScan::countVirtualStages()
{
    vpp = 0;
    for (const auto& f : folders)
        if (f.readable) {
            vpp = static_cast<int>(f.chunks.size());
            break;
        }
    vpp = std::max(vpp, 1);
    if (config.virtualPipeline && *config.virtualPipeline != vpp)
        info.problems.push_back({ info.root, "", config.virtualPipeline.describe("virtual_pipeline_model_parallel_size")
                                                     + " but the files hold " + std::to_string(vpp)
                                                     + " model chunk(s); the files are followed" });
    for (const auto& f : folders)
        if (f.readable && static_cast<int>(f.chunks.size()) != vpp) {
            info.problems.push_back({ f.path, "", "holds " + std::to_string(f.chunks.size()) + " model chunk(s) but "
                                                      "other files hold " + std::to_string(vpp) });
            complete = false;
        }
    config.virtualPipeline.value = vpp > 1 ? std::optional<std::int64_t>(vpp) : std::nullopt;
    info.parallel.virtualPipeline = vpp;
}

/// Layers per (stage, virtual stage), from the files; numberLayers() has the config fill stages whose files are
/// missing.
std::vector<std::vector<StageLayers>> PerRankScan::countStageLayers()
{
    std::vector<std::vector<StageLayers>> stages(static_cast<std::size_t>(grid.pp),
                                                 std::vector<StageLayers>(static_cast<std::size_t>(vpp)));
    for (int pp = 0; pp < grid.pp; ++pp)
        for (int ep = 0; ep < grid.ep; ++ep)
            for (int tp = 0; tp < grid.tp; ++tp) {
                MegatronRankFolder* f = cells[cell(tp, pp, ep)];
                if (!f || !f->readable)
                    continue;
                for (int vp = 0; vp < vpp && vp < static_cast<int>(f->chunks.size()); ++vp) {
                    std::int64_t count = 0;
                    for (const auto& t : f->chunks[static_cast<std::size_t>(vp)])
                        if (auto layer = parseMegatronLayerName(t.name))
                            count = std::max(count, layer->layer + 1);
                    StageLayers& s = stages[static_cast<std::size_t>(pp)][static_cast<std::size_t>(vp)];
                    if (!s.count) {
                        s.count = count;
                        s.file = f->path;
                    } else if (*s.count != count) {
                        info.problems.push_back({ f->path, "", "holds " + std::to_string(count) + " layers in model chunk "
                                                                   + std::to_string(vp) + " but " + s.file + " holds "
                                                                   + std::to_string(*s.count) });
                    }
                }
            }
    return stages;
}

/// The first global layer number of each (stage, virtual stage), unknown from the first stage whose layer count
/// neither its files nor the config tell.
void PerRankScan::numberLayers()
{
    std::vector<std::vector<StageLayers>> stages = countStageLayers();
    std::int64_t total = 0;
    bool totalKnown = true;
    layerOffsets.assign(static_cast<std::size_t>(grid.pp),
                        std::vector<std::optional<std::int64_t>>(static_cast<std::size_t>(vpp)));
    // Megatron's interleaved order: all pipeline stages of virtual stage 0, then of virtual stage 1, …
    for (int vp = 0; vp < vpp; ++vp)
        for (int pp = 0; pp < grid.pp; ++pp) {
            StageLayers& s = stages[static_cast<std::size_t>(pp)][static_cast<std::size_t>(vp)];
            const auto expected = megatronStageLayers(config, pp, vp);
            if (s.count && expected && *s.count != *expected)
                info.problems.push_back({ s.file, "", "model chunk " + std::to_string(vp) + " holds "
                                                          + std::to_string(*s.count) + " layers but "
                                                          + config.numLayers.describe("num_layers")
                                                          + " split over the pipeline gives "
                                                          + std::to_string(*expected) });
            if (!s.count)
                s.count = expected;
            if (totalKnown && s.count) {
                layerOffsets[static_cast<std::size_t>(pp)][static_cast<std::size_t>(vp)] = total;
                total += *s.count;
            } else {
                totalKnown = false;
            }
        }
    if (totalKnown && config.numLayers && total != *config.numLayers)
        info.problems.push_back({ info.root, "", "the files hold " + std::to_string(total) + " layers but "
                                                     + config.numLayers.describe("num_layers") });
    if (totalKnown)
        info.notes["num_layers"] = std::to_string(total);
}

/// Routed experts: local expert j of EP rank e is global expert e·(experts per rank) + j.
void PerRankScan::countLocalExperts()
{
    for (const auto& f : folders)
        for (const auto& chunk : f.chunks)
            for (const auto& t : chunk)
                if (auto layer = parseMegatronLayerName(t.name))
                    if (auto expert = parseMegatronExpertName(layer->rest))
                        localExperts = std::max(localExperts, expert->expert + 1);
    if (config.numExperts && localExperts > 0) {
        if (*config.numExperts % grid.ep != 0 || localExperts > *config.numExperts / grid.ep)
            info.problems.push_back({ info.root, "", "the files hold " + std::to_string(localExperts)
                                                         + " experts per rank, which does not fit "
                                                         + config.numExperts.describe("num_moe_experts") + " over "
                                                         + std::to_string(grid.ep) + " expert ranks" });
        else
            localExperts = *config.numExperts / grid.ep;
    }
    // Expert weights are split over the expert-tensor-parallel group; size 1 means every TP rank holds them whole.
    expertsReplicatedOverTp = config.expertTensorParallel && *config.expertTensorParallel == 1;
    if (config.expertTensorParallel && *config.expertTensorParallel != 1 && *config.expertTensorParallel != grid.tp)
        info.problems.push_back({ info.root, "", config.expertTensorParallel.describe("expert_tensor_parallel_size")
                                                     + " differs from the tensor-parallel size "
                                                     + std::to_string(grid.tp)
                                                     + "; Tessera cannot place such expert slices yet" });
}

/// Gathers every file's tensors under their global names, in Megatron's layer order.
void PerRankScan::gatherTensors()
{
    std::unordered_map<std::string, std::size_t> index;
    int skippedExtraState = 0;
    for (const auto& f : folders)
        skippedExtraState += f.skippedExtraState;
    for (int vp = 0; vp < vpp; ++vp)
        for (int pp = 0; pp < grid.pp; ++pp) {
            const auto& offset = layerOffsets[static_cast<std::size_t>(pp)][static_cast<std::size_t>(vp)];
            for (int ep = 0; ep < grid.ep; ++ep)
                for (int tp = 0; tp < grid.tp; ++tp) {
                    MegatronRankFolder* f = cells[cell(tp, pp, ep)];
                    if (!f || !f->readable || vp >= static_cast<int>(f->chunks.size()))
                        continue;
                    gatherChunk(*f, vp, ep, offset, index);
                }
        }
    if (skippedExtraState)
        info.notes["skipped_extra_state"] = std::to_string(skippedExtraState);
}

/// Adds one file's model chunk `vp` to `gathered`: local layer numbers become global ones (from `offset`, this
/// stage's first layer) and local expert numbers global ones (from the EP rank).
void PerRankScan::gatherChunk(const MegatronRankFolder& f, int vp, int ep, const std::optional<std::int64_t>& offset,
                              std::unordered_map<std::string, std::size_t>& index)
{
    bool reportedUnnumbered = false;
    for (const auto& t : f.chunks[static_cast<std::size_t>(vp)]) {
        std::string name = t.name;
        bool expert = false;
        if (auto layer = parseMegatronLayerName(t.name)) {
            if (!offset) {
                if (!reportedUnnumbered)
                    info.problems.push_back({ f.path, "", "the layers of model chunk "
                        + std::to_string(vp) + " cannot be numbered because an earlier pipeline "
                        "stage is missing and num_layers is unknown; they are left out" });
                reportedUnnumbered = true;
                continue;
            }
            std::string rest = layer->rest;
            if (auto e = parseMegatronExpertName(rest)) {
                expert = true;
                rest = e->before + std::to_string(ep * localExperts + e->expert) + e->after;
            }
            name = layer->prefix + std::to_string(*offset + layer->layer) + "." + rest;
        } else if (auto mtp = parseMegatronMtpName(t.name)) {
            // An MTP layer keeps its number; its routed experts are numbered per EP rank too.
            if (auto e = parseMegatronExpertName(mtp->rest)) {
                expert = true;
                name = mtp->prefix + e->before + std::to_string(ep * localExperts + e->expert) + e->after;
            }
        }
        sawFc1 |= name.find("linear_fc1.weight") != std::string::npos;
        auto [it, inserted] = index.emplace(name, gathered.size());
        if (inserted)
            gathered.push_back({ name, expert, {} });
        gathered[it->second].holders.push_back({ &f, &t.tensor });
    }
}

/// The two things the names alone may get wrong: a pre-mcore model, and a gated linear_fc1 nothing records.
void PerRankScan::checkModelKind()
{
    // Megatron-core vision-language models nest a GPT model under language_model.decoder; pre-mcore models had
    // language_model.encoder.
    for (const auto& g : gathered)
        if (g.name.rfind("language_model.encoder.", 0) == 0) {
            // Pre-mcore models (query_key_value, dense_h_to_4h…) use other names and other TP rules.
            info.problems.push_back({ info.root, g.name, "this is a pre-mcore Megatron model (language_model.*); "
                                                         "Tessera reads Megatron-core checkpoints only, so these "
                                                         "tensors are not placed correctly" });
            break;
        }

    // GLU matters only when linear_fc1 is split over TP ranks; with one rank [gate; up] is already global.
    gated = config.gatedLinearUnit && *config.gatedLinearUnit != 0;
    if (!config.gatedLinearUnit && sawFc1 && grid.tp > 1)
        info.problems.push_back({ info.root, "", "nothing records whether linear_fc1 is gated (gated_linear_unit in "
                                                 "transformer_config.json, swiglu in args), so its TP slices are "
                                                 "joined as plain rows; for a SwiGLU model that mixes gate and up" });
}

/// Every gathered tensor as a global tensor with placed pieces, in gathered order.
void PerRankScan::placeTensors()
{
    ShapeMismatches shapeMismatches;
    for (const auto& g : gathered)
        placeTensor(g, shapeMismatches);
    reportShapeMismatches(shapeMismatches);
}

/// One gathered tensor placed: its global shape from how TP splits it, its pieces, their coverage, and its shape
/// against the config.
void PerRankScan::placeTensor(const Gathered& g, ShapeMismatches& shapeMismatches)
{
    TensorInfo tensor;
    tensor.name = g.name;
    const Holder& first = g.holders.front();
    const Shape local = first.tensor->shape;
    tensor.dtype = first.tensor->dtype;
    const MegatronTpSplit split = tpSplitOf(g, local);
    const std::string why = splitGlobalShape(tensor, split, local, grid.tp);
    if (!why.empty()) {
        info.problems.push_back({ first.folder->path, g.name, why });
        info.tensors.push_back(std::move(tensor));
        return;
    }
    addPieces(tensor, g, split, local);
    checkTensorCoverage(tensor);
    recordShapeMismatch(tensor, split, local, shapeMismatches);
    info.tensors.push_back(std::move(tensor));
}

/// How a tensor's slices split over the TP ranks; `local` is its first slice's shape.
MegatronTpSplit PerRankScan::tpSplitOf(const Gathered& g, const Shape& local) const
{
    MegatronTpSplit split = (g.expert && expertsReplicatedOverTp) ? MegatronTpSplit::Replicated
                                                                   : megatronTpSplit(g.name, gated);
    // A value model's head (LinearForLastLayer, [1, hidden]) is a plain replicated linear.
    if (g.name == "output_layer.weight" && !local.empty() && local[0] == 1 && grid.tp > 1)
        split = MegatronTpSplit::Replicated;
    return split;
}

/// The pieces of every slice that agrees with the first one; the first holder of each box is its primary.
void PerRankScan::addPieces(TensorInfo& tensor, const Gathered& g, MegatronTpSplit split, const Shape& local)
{
    const Holder& first = g.holders.front();
    std::set<int> placedTp;
    bool anyPlaced = false;
    for (const Holder& h : g.holders) {
        const MegatronRankFolder& f = *h.folder;
        if (h.tensor->dtype != tensor.dtype || h.tensor->shape != local) {
            info.problems.push_back({ f.path, g.name, f.folderName + " has " + std::string(torchName(h.tensor->dtype))
                                                          + " " + shapeToString(h.tensor->shape) + " but "
                                                          + first.folder->folderName + " has "
                                                          + std::string(torchName(tensor.dtype)) + " " + shapeToString(local) });
            continue;
        }
        // The first holder of a box provides it; the same box from another rank (replicated tensors, non-expert
        // tensors on every expert rank) is a replica.
        const bool primary = split == MegatronTpSplit::Replicated ? !anyPlaced : placedTp.insert(f.tp).second;
        anyPlaced = true;
        addHolderPieces(tensor, h, split, local, primary ? PieceRole::Primary : PieceRole::Replica);
    }
}

/// The boxes one rank's slice `h` provides of the global tensor: one, or two for a gated linear_fc1.
void PerRankScan::addHolderPieces(TensorInfo& tensor, const Holder& h, MegatronTpSplit split, const Shape& local,
                                  PieceRole role)
{
    const MegatronRankFolder& f = *h.folder;
    auto add = [&](const Shape& offsets, const Shape& localOffsets, const Shape& box) {
        auto piece = f.archive->piece(*h.tensor, offsets, localOffsets, box);
        if (!piece) {
            info.problems.push_back({ f.path, tensor.name, piece.error().message });
            return;
        }
        // The model-parallel rank in Megatron's default tp-cp-ep-dp-pp order; the global rank when DP=1.
        piece->rank = (f.pp * grid.ep + f.ep) * grid.tp + f.tp;
        piece->role = role;
        tensor.pieces.push_back(std::move(*piece));
    };
    Shape offsets(local.size(), 0);
    switch (split) {
    case MegatronTpSplit::Replicated:
        add(offsets, {}, local);
        break;
    case MegatronTpSplit::Rows:
        offsets[0] = f.tp * local[0];
        add(offsets, {}, local);
        break;
    case MegatronTpSplit::Columns:
        offsets[1] = f.tp * local[1];
        add(offsets, {}, local);
        break;
    case MegatronTpSplit::GluRows: {
        // Rank r holds [gate_r; up_r]; the global tensor is [gate_0 … gate_{T-1}; up_0 … up_{T-1}].
        const std::int64_t half = local[0] / 2;
        Shape box = local;
        box[0] = half;
        Shape localOffsets(local.size(), 0);
        offsets[0] = f.tp * half;
        add(offsets, localOffsets, box);
        localOffsets[0] = half;
        offsets[0] = grid.tp * half + f.tp * half;
        add(offsets, localOffsets, box);
        break;
    }
    }
}

/// Gaps and overlaps of a complete checkpoint's tensor; the holes an incomplete one leaves.
void PerRankScan::checkTensorCoverage(const TensorInfo& tensor)
{
    if (complete) {
        for (const auto& message : checkCoverage(tensor))
            info.problems.push_back({ info.root, tensor.name, message });
    } else if (const std::string gap = checkGaps(tensor); !gap.empty()) {
        // The absent folders are reported once; each tensor they leave with holes says so too.
        info.problems.push_back({ info.root, tensor.name,
                                  "incomplete: " + gap + " (a rank's folder is missing or unreadable)" });
    }
}

/// Notes a global shape that disagrees with the config, under its parameter's name with the layer number starred.
void PerRankScan::recordShapeMismatch(const TensorInfo& tensor, MegatronTpSplit split, const Shape& local,
                                      ShapeMismatches& shapeMismatches) const
{
    // transformer_config.json describes the language model; a vision tower has sizes of its own.
    const bool visionTower = tensor.name.rfind("vision_model.", 0) == 0;
    if (auto mismatch = visionTower ? std::nullopt : checkShapeAgainstConfig(tensor.name, tensor.shape, 0, config)) {
        std::string key = tensor.name;
        if (auto layer = parseMegatronLayerName(tensor.name))
            key = layer->prefix + "*." + layer->rest;
        std::string message = "global shape " + shapeToString(tensor.shape) + ": " + mismatch->message;
        const bool splitDim = (split == MegatronTpSplit::Rows || split == MegatronTpSplit::GluRows)
            ? mismatch->dim == 0
            : split == MegatronTpSplit::Columns && mismatch->dim == 1;
        if (splitDim)
            message += "; the global size is the per-rank " + std::to_string(local[mismatch->dim]) + " × "
                       + config.tensorParallel.describe("tensor_model_parallel_size") + ", is that size right?";
        auto [it, inserted] = shapeMismatches.emplace(key + "\n" + message, std::make_pair(tensor.name, 0));
        ++it->second.second;
        (void)inserted;
    }
}

/// One problem per parameter whose shape disagrees with the config, counting the other layers alike.
void PerRankScan::reportShapeMismatches(const ShapeMismatches& shapeMismatches)
{
    for (const auto& [key, where] : shapeMismatches) {
        std::string message = key.substr(key.find('\n') + 1);
        if (where.second > 1)
            message += " (the same in " + std::to_string(where.second - 1) + " more layer(s))";
        info.problems.push_back({ config.sources.empty() ? info.root : config.sources.front(), where.first, message });
    }
}

} // namespace

Result<CheckpointInfo> scanMegatronPerRank(const std::string& dir, int threads, Progress& progress)
{
    PerRankScan scan(dir);
    TESSERA_TRY(scan.listRankFolders());
    scan.findRankFiles();
    TESSERA_TRY(scan.readRankFolders(threads, progress));
    scan.loadConfig();
    if (!scan.resolveSizes())
        return std::move(scan.info);
    scan.placeFolders();
    scan.checkMissingRanks();
    scan.countVirtualStages();
    scan.numberLayers();
    scan.countLocalExperts();
    scan.gatherTensors();
    scan.checkModelKind();
    scan.placeTensors();
    return std::move(scan.info);
}

} // namespace tessera
