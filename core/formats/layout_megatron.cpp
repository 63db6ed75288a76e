// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron per-rank checkpoints: one folder per model-parallel rank, mp_rank_TT[_PPP][_EEE], holding verl's
// legacy model.pt (a list of state dicts, one per virtual pipeline stage) or Megatron-LM's model_optim_rng.pt
// (a dict with `model` or `model0`, `model1`…, and `args`). Every file holds raw per-rank slices with local
// layer and expert numbers; this reader turns them into global tensors with placed pieces.

#include "model/coverage.h"
#include "formats/layouts.h"
#include "formats/megatron_config.h"
#include "formats/megatron_names.h"
#include "io/path_kinds.h"
#include "io/regular_file.h"
#include "io/printable.h"
#include "io/regex.h"
#include "parallel.h"
#include "pickle/saved_tensor.h"
#include "formats/layout_registry.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace fs = std::filesystem;

namespace tessera {

namespace {

using K = PyValue::Kind;

struct LocalTensor {
    std::string name;
    TensorRef tensor;
};

/// One mp_rank_* folder and what its file holds.
struct RankFolder {
    std::string folderName;             ///< "mp_rank_01_000"
    std::string dir;                    ///< absolute folder path
    std::string path;                   ///< absolute data file path; empty when the folder has none
    std::vector<std::int64_t> numbers;  ///< the numbers in the folder name, in order
    int tp = 0, pp = 0, ep = 0;         ///< resolved ranks
    std::shared_ptr<TorchSaveFile> archive;
    std::vector<std::vector<LocalTensor>> chunks; ///< one state dict per virtual pipeline stage
    PyRef args;
    std::vector<Problem> problems;
    bool readable = false;
    int skippedExtraState = 0;
};

/// Longest flattened parameter name accepted; real ones are under 200 characters.
constexpr std::size_t kMaxFlatNameLength = 64 * 1024;

/// Megatron-LM nests nothing in mcore state dicts, but older models did (`language_model.encoder…`): flatten.
/// Each nested dict is entered once: a pickle can refer to one dict from many places ("billion laughs": 30
/// levels of two references each name 2^30 tensors in 2 KB), which no state dict does. Iterative, so the work is
/// bounded by the values actually in the file.
Status flatten(const PyRef& root, std::vector<std::pair<std::string, PyRef>>& out)
{
    struct Frame {
        std::vector<std::pair<std::string, PyRef>> items;
        std::size_t next = 0;
        std::string prefix;
    };
    std::unordered_set<const PyValue*> entered { root.get() };
    std::vector<Frame> stack;
    stack.push_back({ stateDictItems(root), 0, std::string() });
    while (!stack.empty()) {
        Frame& frame = stack.back();
        if (frame.next == frame.items.size()) {
            stack.pop_back();
            continue;
        }
        auto& [name, value] = frame.items[frame.next++];
        if (frame.prefix.size() + name.size() > kMaxFlatNameLength)
            return makeError("a parameter name is longer than " + std::to_string(kMaxFlatNameLength)
                             + " characters; this is not a state dict");
        std::string full = frame.prefix + name;
        if (value && value->kind == K::Dict && !isMegatronExtraState(name)) {
            if (!entered.insert(value.get()).second)
                return makeError("the state dict refers to the same nested dict ('" + printableText(full)
                                 + "') more than once; a saved model never does");
            PyRef nested = value; // `frame` may move when the stack grows
            stack.push_back({ stateDictItems(nested), 0, full + "." });
        } else {
            out.emplace_back(std::move(full), value);
        }
    }
    return Status::success();
}

void readChunk(RankFolder& rank, const PyRef& dict)
{
    std::vector<LocalTensor> tensors;
    std::vector<std::pair<std::string, PyRef>> items;
    if (auto flat = flatten(dict, items); !flat) {
        rank.problems.push_back({ rank.path, "", flat.error().message });
        return;
    }
    for (const auto& [name, value] : items) {
        // Transformer Engine's FP8 metadata: uint8 tensors, BytesIO objects or None, never model weights.
        if (isMegatronExtraState(name)) {
            ++rank.skippedExtraState;
            continue;
        }
        if (const std::string why = megatronIndexProblem(name); !why.empty()) {
            rank.problems.push_back({ rank.path, name, why });
            continue;
        }
        auto saved = interpretSavedTensor(value, *rank.archive);
        if (!saved) {
            rank.problems.push_back({ rank.path, name, saved.error().message });
            continue;
        }
        if (!saved->has_value())
            continue;
        if ((*saved)->kind != SavedTensor::Kind::Plain) {
            rank.problems.push_back({ rank.path, name, "holds a DTensor or ShardedTensor; Megatron per-rank files "
                                                       "hold plain per-rank slices, so Tessera cannot place it" });
            continue;
        }
        tensors.push_back({ name, (*saved)->local });
    }
    rank.chunks.push_back(std::move(tensors));
}

/// Reads one folder's pickle: the list of state dicts (verl) or the dict with model/model0… and args (Megatron-LM).
void readRankFolder(RankFolder& rank)
{
    auto archive = TorchSaveFile::open(rank.path);
    if (!archive) {
        rank.problems.push_back({ rank.path, "", archive.error().message });
        return;
    }
    rank.archive = std::make_shared<TorchSaveFile>(std::move(*archive));
    const PyRef& root = rank.archive->root();
    if (root && root->kind == K::List) {
        for (std::size_t i = 0; i < root->items.size(); ++i) {
            if (!root->items[i] || root->items[i]->kind != K::Dict) {
                rank.problems.push_back({ rank.path, "", "item " + std::to_string(i) + " of the list is not a state "
                                                             "dict (found " + (root->items[i] ? root->items[i]->repr(1) : "nothing") + ")" });
                return;
            }
            readChunk(rank, root->items[i]);
        }
    } else if (root && root->kind == K::Dict) {
        rank.args = root->get("args");
        if (auto model = root->get("model")) {
            readChunk(rank, model);
        } else if (root->get("model0")) {
            for (int i = 0;; ++i) {
                auto chunk = root->get("model" + std::to_string(i));
                if (!chunk)
                    break;
                readChunk(rank, chunk);
            }
        } else {
            // A bare state dict (a hand-made per-rank save): one stage.
            readChunk(rank, root);
        }
    } else {
        rank.problems.push_back({ rank.path, "", "the file holds neither a list of state dicts nor a dict with "
                                                 "'model' (found " + (root ? root->repr(1) : std::string("nothing")) + ")" });
        return;
    }
    rank.readable = true;
}

std::string folderNameFor(int tp, int pp, int ep, bool withPp, bool withEp)
{
    char buf[64];
    std::string name;
    std::snprintf(buf, sizeof buf, "mp_rank_%02d", tp);
    name = buf;
    if (withPp) {
        std::snprintf(buf, sizeof buf, "_%03d", pp);
        name += buf;
    }
    if (withEp) {
        std::snprintf(buf, sizeof buf, "_%03d", ep);
        name += buf;
    }
    return name;
}

/// What the folder names and the config say together about which number in a folder name is which.
struct GridShape {
    int tp = 1, pp = 1, ep = 1, vpp = 1;
    bool namesHavePp = false, namesHaveEp = false;
};

/// Decides the grid; returns an error message when nothing tells, or the names contradict the config.
Result<GridShape> resolveGrid(std::vector<RankFolder>& folders, MegatronConfig& config, std::vector<Problem>& problems,
                              const std::string& root)
{
    std::set<std::size_t> parts;
    for (const auto& f : folders)
        parts.insert(f.numbers.size());
    if (parts.size() > 1)
        return makeError("the mp_rank_* folder names mix forms (" + folders.front().folderName + " and others with a "
                         "different number of parts); remove the folders that do not belong to this checkpoint");
    const std::size_t n = *parts.begin();
    GridShape grid;
    const auto& pp = config.pipelineParallel;
    const auto& ep = config.expertParallel;
    // Megatron appends _PPP only when PP > 1 and _EEE only when EP > 1 (get_checkpoint_name).
    if (n == 1) {
        grid.namesHavePp = grid.namesHaveEp = false;
    } else if (n == 3) {
        grid.namesHavePp = grid.namesHaveEp = true;
    } else if (pp) {
        grid.namesHavePp = *pp > 1;
        grid.namesHaveEp = !grid.namesHavePp;
    } else if (ep) {
        grid.namesHaveEp = *ep > 1;
        grid.namesHavePp = !grid.namesHaveEp;
    } else {
        return makeError("folder names like " + folders.front().folderName + " are ambiguous: the second number is "
                         "the pipeline stage when pipeline_model_parallel_size > 1, or the expert rank when "
                         "expert_model_parallel_size > 1, and nothing records which. Put a transformer_config.json "
                         "with pipeline_model_parallel_size and expert_model_parallel_size beside the mp_rank_* "
                         "folders (verl writes one in actor/)");
    }
    auto contradiction = [&](const MegatronSetting& s, const char* key, bool namesHave) {
        if (s && (*s > 1) != namesHave)
            problems.push_back({ root, "", s.describe(key) + (namesHave ? " but the folder names carry that rank ("
                                                                          : " but the folder names carry no such rank (")
                                               + folders.front().folderName + "); the folder names are followed" });
    };
    contradiction(pp, "pipeline_model_parallel_size", grid.namesHavePp);
    contradiction(ep, "expert_model_parallel_size", grid.namesHaveEp);

    int maxTp = 0, maxPp = 0, maxEp = 0;
    for (auto& f : folders) {
        f.tp = static_cast<int>(f.numbers[0]);
        f.pp = grid.namesHavePp ? static_cast<int>(f.numbers[1]) : 0;
        f.ep = grid.namesHaveEp ? static_cast<int>(f.numbers[grid.namesHavePp ? 2 : 1]) : 0;
        maxTp = std::max(maxTp, f.tp);
        maxPp = std::max(maxPp, f.pp);
        maxEp = std::max(maxEp, f.ep);
    }
    auto size = [&](MegatronSetting& s, bool inNames, int maxIndex) {
        if (s && (*s > 1) == inNames && *s >= 1)
            return static_cast<int>(*s);
        s.value = inNames ? maxIndex + 1 : 1;
        s.source = inNames ? std::string("the mp_rank_* folder names") : std::string("absent from the folder names");
        return static_cast<int>(*s);
    };
    grid.pp = size(config.pipelineParallel, grid.namesHavePp, maxPp);
    grid.ep = size(config.expertParallel, grid.namesHaveEp, maxEp);
    if (config.tensorParallel && *config.tensorParallel >= 1) {
        grid.tp = static_cast<int>(*config.tensorParallel);
    } else {
        config.tensorParallel.value = maxTp + 1;
        config.tensorParallel.source = "the mp_rank_* folder names";
        grid.tp = maxTp + 1;
    }
    return grid;
}

/// Layer counts per (pipeline stage, virtual stage) as the files hold them: highest local layer number + 1.
struct StageLayers {
    std::optional<std::int64_t> count;
    std::string file; ///< a file that holds this stage, for messages
};

} // namespace

Result<CheckpointInfo> scanMegatronPerRank(const std::string& dir, int threads, Progress& progress)
{
    CheckpointInfo info;
    info.root = absoluteNormal(dir).string();

    static const Regex folderPattern = Regex::fixed(R"(mp_rank_(\d{2,})(?:_(\d{3,}))?(?:_(\d{3,}))?)");
    std::vector<RankFolder> folders;
    std::error_code ec;
    for (const auto& entry : folderEntries(info.root, ec)) {
        std::vector<std::string> m;
        const std::string name = entry.path().filename().string();
        if (!entry.is_directory(ec) || !folderPattern.fullMatch(name, m))
            continue;
        RankFolder f;
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
              [](const RankFolder& a, const RankFolder& b) { return a.folderName < b.folderName; });

    // Which file: verl's model.pt or Megatron-LM's model_optim_rng.pt.
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

    std::atomic<std::size_t> done { 0 };
    std::mutex progressMutex;
    parallelFor(folders.size(), resolvePickleReaders(threads), [&](std::size_t i) {
        if (folders[i].path.empty() || progress.isCanceled())
            return;
        readRankFolder(folders[i]);
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

    // The sizes: transformer_config.json first (verl), then args (Megatron-LM), then the folder names.
    MegatronConfig config = loadTransformerConfig(info);
    for (const auto& f : folders)
        if (f.readable && f.args) {
            const std::string source = "args in " + f.folderName + "/" + fs::path(f.path).filename().string();
            for (auto& conflict : config.mergeFrom(megatronConfigFromArgs(f.args, source)))
                info.problems.push_back({ f.path, "", conflict });
            break;
        }

    auto grid = resolveGrid(folders, config, info.problems, info.root);
    if (!grid) {
        info.problems.push_back({ info.root, "", grid.error().message });
        return info;
    }
    // Every cell of the grid gets a slot below, so its size must come from the folders present, not from what a
    // config claims (TP=65536 × PP=65537 in 724 bytes of args overflows an int and any allocation).
    const std::uint64_t gridCells = std::uint64_t(grid->tp) * std::uint64_t(grid->pp) * std::uint64_t(grid->ep);
    if (gridCells > 8 * folders.size() + 64) {
        info.problems.push_back({ info.root, "", "the parallel sizes (" + config.tensorParallel.describe("tensor_model_parallel_size")
                                                     + ", " + config.pipelineParallel.describe("pipeline_model_parallel_size")
                                                     + ", " + config.expertParallel.describe("expert_model_parallel_size")
                                                     + ") make " + std::to_string(gridCells) + " ranks, but only "
                                                     + std::to_string(folders.size())
                                                     + " mp_rank_* folders are present; the sizes cannot be right" });
        return info;
    }
    info.parallel.tensorParallel = grid->tp;
    info.parallel.pipelineParallel = grid->pp;
    info.parallel.expertParallel = grid->ep;
    info.parallel.worldSize = static_cast<int>(gridCells);

    // Place folders in the (tp, pp, ep) grid; folders outside the configured sizes are reported and left out.
    auto cell = [&](int tp, int pp, int ep) { return (static_cast<std::size_t>(pp) * grid->ep + ep) * grid->tp + tp; };
    std::vector<RankFolder*> cells(static_cast<std::size_t>(info.parallel.worldSize), nullptr);
    for (auto& f : folders) {
        std::string outside;
        if (f.tp >= grid->tp)
            outside = "TP rank " + std::to_string(f.tp) + " but " + config.tensorParallel.describe("tensor_model_parallel_size");
        else if (f.pp >= grid->pp)
            outside = "pipeline stage " + std::to_string(f.pp) + " but "
                      + config.pipelineParallel.describe("pipeline_model_parallel_size");
        else if (f.ep >= grid->ep)
            outside = "expert rank " + std::to_string(f.ep) + " but "
                      + config.expertParallel.describe("expert_model_parallel_size");
        if (!outside.empty()) {
            info.problems.push_back({ f.dir, "", "this folder is for " + outside + "; it is left out" });
            continue;
        }
        cells[cell(f.tp, f.pp, f.ep)] = &f;
    }
    auto rankText = [&](int tp, int pp, int ep) {
        std::string s = "TP rank " + std::to_string(tp) + " of " + std::to_string(grid->tp);
        if (grid->pp > 1)
            s += ", pipeline stage " + std::to_string(pp) + " of " + std::to_string(grid->pp);
        if (grid->ep > 1)
            s += ", expert rank " + std::to_string(ep) + " of " + std::to_string(grid->ep);
        return s;
    };
    bool complete = true;
    std::set<int> tpRanksSeen;
    int missingExpertRankFolders = 0, missingFolders = 0;
    for (int pp = 0; pp < grid->pp; ++pp)
        for (int ep = 0; ep < grid->ep; ++ep)
            for (int tp = 0; tp < grid->tp; ++tp) {
                RankFolder* f = cells[cell(tp, pp, ep)];
                if (f)
                    tpRanksSeen.insert(tp);
                if (!f) {
                    ++missingFolders;
                    missingExpertRankFolders += ep > 0 ? 1 : 0;
                    const std::string name = folderNameFor(tp, pp, ep, grid->namesHavePp, grid->namesHaveEp);
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
                                                 + std::to_string(grid->ep - 1) + " expert rank(s) are absent; verl's "
                                                 "legacy Megatron saver writes only those when expert parallelism is "
                                                 "on (save with dist checkpointing to keep every expert)" });
    if (static_cast<int>(tpRanksSeen.size()) < grid->tp && !tpRanksSeen.empty())
        info.problems.push_back({ info.root, "", "only " + std::to_string(tpRanksSeen.size()) + " TP rank(s) have "
                                                     "folders but " + config.tensorParallel.describe("tensor_model_parallel_size")
                                                     + "; is that size right?" });

    // Virtual pipeline stages: the number of state dicts per file, which every file must agree on.
    int vpp = 0;
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

    // Layers per (stage, virtual stage), from the files; the config fills stages whose files are missing.
    std::vector<std::vector<StageLayers>> stages(static_cast<std::size_t>(grid->pp),
                                                 std::vector<StageLayers>(static_cast<std::size_t>(vpp)));
    for (int pp = 0; pp < grid->pp; ++pp)
        for (int ep = 0; ep < grid->ep; ++ep)
            for (int tp = 0; tp < grid->tp; ++tp) {
                RankFolder* f = cells[cell(tp, pp, ep)];
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
    std::int64_t total = 0;
    bool totalKnown = true;
    std::vector<std::vector<std::optional<std::int64_t>>> layerOffsets(
        static_cast<std::size_t>(grid->pp), std::vector<std::optional<std::int64_t>>(static_cast<std::size_t>(vpp)));
    // Megatron's interleaved order: all pipeline stages of virtual stage 0, then of virtual stage 1, …
    for (int vp = 0; vp < vpp; ++vp)
        for (int pp = 0; pp < grid->pp; ++pp) {
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

    // Routed experts: local expert j of EP rank e is global expert e·(experts per rank) + j.
    std::int64_t localExperts = 0;
    for (const auto& f : folders)
        for (const auto& chunk : f.chunks)
            for (const auto& t : chunk)
                if (auto layer = parseMegatronLayerName(t.name))
                    if (auto expert = parseMegatronExpertName(layer->rest))
                        localExperts = std::max(localExperts, expert->expert + 1);
    if (config.numExperts && localExperts > 0) {
        if (*config.numExperts % grid->ep != 0 || localExperts > *config.numExperts / grid->ep)
            info.problems.push_back({ info.root, "", "the files hold " + std::to_string(localExperts)
                                                         + " experts per rank, which does not fit "
                                                         + config.numExperts.describe("num_moe_experts") + " over "
                                                         + std::to_string(grid->ep) + " expert ranks" });
        else
            localExperts = *config.numExperts / grid->ep;
    }
    // Expert weights are split over the expert-tensor-parallel group; size 1 means every TP rank holds them whole.
    const bool expertsReplicatedOverTp = config.expertTensorParallel && *config.expertTensorParallel == 1;
    if (config.expertTensorParallel && *config.expertTensorParallel != 1 && *config.expertTensorParallel != grid->tp)
        info.problems.push_back({ info.root, "", config.expertTensorParallel.describe("expert_tensor_parallel_size")
                                                     + " differs from the tensor-parallel size "
                                                     + std::to_string(grid->tp)
                                                     + "; Tessera cannot place such expert slices yet" });

    // Gather every file's tensors under their global names, in Megatron's layer order.
    struct Holder {
        const RankFolder* folder;
        const TensorRef* tensor;
    };
    struct Gathered {
        std::string name;
        bool expert = false;
        std::vector<Holder> holders;
    };
    std::vector<Gathered> gathered;
    std::unordered_map<std::string, std::size_t> index;
    bool sawFc1 = false;
    int skippedExtraState = 0;
    for (const auto& f : folders)
        skippedExtraState += f.skippedExtraState;
    for (int vp = 0; vp < vpp; ++vp)
        for (int pp = 0; pp < grid->pp; ++pp) {
            const auto& offset = layerOffsets[static_cast<std::size_t>(pp)][static_cast<std::size_t>(vp)];
            for (int ep = 0; ep < grid->ep; ++ep)
                for (int tp = 0; tp < grid->tp; ++tp) {
                    RankFolder* f = cells[cell(tp, pp, ep)];
                    if (!f || !f->readable || vp >= static_cast<int>(f->chunks.size()))
                        continue;
                    bool reportedUnnumbered = false;
                    for (const auto& t : f->chunks[static_cast<std::size_t>(vp)]) {
                        std::string name = t.name;
                        bool expert = false;
                        if (auto layer = parseMegatronLayerName(t.name)) {
                            if (!offset) {
                                if (!reportedUnnumbered)
                                    info.problems.push_back({ f->path, "", "the layers of model chunk "
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
                        gathered[it->second].holders.push_back({ f, &t.tensor });
                    }
                }
        }
    if (skippedExtraState)
        info.notes["skipped_extra_state"] = std::to_string(skippedExtraState);
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
    bool gated = config.gatedLinearUnit && *config.gatedLinearUnit != 0;
    if (!config.gatedLinearUnit && sawFc1 && grid->tp > 1)
        info.problems.push_back({ info.root, "", "nothing records whether linear_fc1 is gated (gated_linear_unit in "
                                                 "transformer_config.json, swiglu in args), so its TP slices are "
                                                 "joined as plain rows; for a SwiGLU model that mixes gate and up" });

    // Shape disagreements with the config are reported once per parameter, not once per layer.
    std::map<std::string, std::pair<std::string, int>> shapeMismatches; // key → (first tensor, count)
    for (const auto& g : gathered) {
        TensorInfo tensor;
        tensor.name = g.name;
        const Holder& first = g.holders.front();
        const Shape local = first.tensor->shape;
        tensor.dtype = first.tensor->dtype;
        MegatronTpSplit split = (g.expert && expertsReplicatedOverTp) ? MegatronTpSplit::Replicated
                                                                       : megatronTpSplit(g.name, gated);
        // A value model's head (LinearForLastLayer, [1, hidden]) is a plain replicated linear.
        if (g.name == "output_layer.weight" && !local.empty() && local[0] == 1 && grid->tp > 1)
            split = MegatronTpSplit::Replicated;
        const int tpSize = grid->tp;
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
        if (!why.empty()) {
            info.problems.push_back({ first.folder->path, g.name, why });
            info.tensors.push_back(std::move(tensor));
            continue;
        }
        std::set<int> placedTp;
        bool anyPlaced = false;
        for (const Holder& h : g.holders) {
            const RankFolder& f = *h.folder;
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
            const PieceRole role = primary ? PieceRole::Primary : PieceRole::Replica;
            auto add = [&](const Shape& offsets, const Shape& localOffsets, const Shape& box) {
                auto piece = f.archive->piece(*h.tensor, offsets, localOffsets, box);
                if (!piece) {
                    info.problems.push_back({ f.path, g.name, piece.error().message });
                    return;
                }
                // The model-parallel rank in Megatron's default tp-cp-ep-dp-pp order; the global rank when DP=1.
                piece->rank = (f.pp * grid->ep + f.ep) * grid->tp + f.tp;
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
                offsets[0] = tpSize * half + f.tp * half;
                add(offsets, localOffsets, box);
                break;
            }
            }
        }
        if (complete) {
            for (const auto& message : checkCoverage(tensor))
                info.problems.push_back({ info.root, g.name, message });
        } else if (const std::string gap = checkGaps(tensor); !gap.empty()) {
            // The absent folders are reported once; each tensor they leave with holes says so too.
            info.problems.push_back({ info.root, g.name,
                                      "incomplete: " + gap + " (a rank's folder is missing or unreadable)" });
        }
        // transformer_config.json describes the language model; a vision tower has sizes of its own.
        const bool visionTower = g.name.rfind("vision_model.", 0) == 0;
        if (auto mismatch = visionTower ? std::nullopt : checkShapeAgainstConfig(g.name, tensor.shape, 0, config)) {
            std::string key = g.name;
            if (auto layer = parseMegatronLayerName(g.name))
                key = layer->prefix + "*." + layer->rest;
            std::string message = "global shape " + shapeToString(tensor.shape) + ": " + mismatch->message;
            const bool splitDim = (split == MegatronTpSplit::Rows || split == MegatronTpSplit::GluRows)
                ? mismatch->dim == 0
                : split == MegatronTpSplit::Columns && mismatch->dim == 1;
            if (splitDim)
                message += "; the global size is the per-rank " + std::to_string(local[mismatch->dim]) + " × "
                           + config.tensorParallel.describe("tensor_model_parallel_size") + ", is that size right?";
            auto [it, inserted] = shapeMismatches.emplace(key + "\n" + message, std::make_pair(g.name, 0));
            ++it->second.second;
            (void)inserted;
        }
        info.tensors.push_back(std::move(tensor));
    }
    for (const auto& [key, where] : shapeMismatches) {
        std::string message = key.substr(key.find('\n') + 1);
        if (where.second > 1)
            message += " (the same in " + std::to_string(where.second - 1) + " more layer(s))";
        info.problems.push_back({ config.sources.empty() ? info.root : config.sources.front(), where.first, message });
    }
    return info;
}

} // namespace tessera
