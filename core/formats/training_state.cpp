// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/training_state.h"

#include "formats/layout_registry.h"
#include "io/guarded_read.h"
#include "io/mapped_file.h"
#include "io/path_kinds.h"
#include "io/printable.h"
#include "pickle/torch_save.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// "state.12.exp_avg" → (12, "exp_avg"); nullopt for tensors elsewhere in the state dict.
std::optional<std::pair<std::int64_t, std::string>> stateEntry(const std::string& name)
{
    if (name.compare(0, 6, "state.") != 0)
        return std::nullopt;
    const std::size_t dot = name.find('.', 6);
    if (dot == std::string::npos || dot == 6 || dot - 6 > 9)
        return std::nullopt;
    const std::string digits = name.substr(6, dot - 6);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    return std::make_pair(static_cast<std::int64_t>(std::stoll(digits)), name.substr(dot + 1));
}

/// The rank files a scalar is read from, each mapped once (a step per parameter and rank).
using MappedFiles = std::map<std::string, std::shared_ptr<MappedFile>>;

/// The bytes of a one-element plain tensor's piece, read from its file; empty when it cannot be read.
std::string scalarBytes(const Piece& p, MappedFiles& maps)
{
    auto& map = maps[p.file];
    if (!map) {
        auto opened = MappedFile::open(p.file);
        if (!opened)
            return {};
        map = *opened;
    }
    const std::uint64_t n = dtypeSize(p.storedDtype);
    if (n == 0 || p.dataOffset > map->size() || n > map->size() - p.dataOffset)
        return {};
    std::string bytes(static_cast<std::size_t>(n), '\0');
    // A file cut short meanwhile is a read error, not a SIGBUS.
    if (!runGuardedRead([&] { std::memcpy(bytes.data(), map->view().data() + p.dataOffset, bytes.size()); }))
        return {};
    return bytes;
}

std::optional<double> scalarValue(DType dtype, const std::string& bytes)
{
    if (dtype == DType::Float32 && bytes.size() == 4) {
        float f;
        std::memcpy(&f, bytes.data(), 4);
        return f;
    }
    if (dtype == DType::Float64 && bytes.size() == 8) {
        double d;
        std::memcpy(&d, bytes.data(), 8);
        return d;
    }
    if (dtype == DType::Int64 && bytes.size() == 8) {
        std::int64_t i;
        std::memcpy(&i, bytes.data(), 8);
        return static_cast<double>(i);
    }
    return std::nullopt;
}

/// Every entry of "state" grouped per parameter; scalar steps read, and checked equal on every rank.
void groupParameters(TrainingState& s)
{
    const CheckpointInfo& info = s.optimizer->info;
    std::map<std::int64_t, std::size_t> byIndex;
    MappedFiles maps;
    for (std::size_t i = 0; i < info.tensors.size(); ++i) {
        const TensorInfo& t = info.tensors[i];
        const auto entry = stateEntry(t.name);
        if (!entry)
            continue;
        auto [it, inserted] = byIndex.emplace(entry->first, s.parameters.size());
        if (inserted)
            s.parameters.push_back({ entry->first, "", {}, std::nullopt });
        ParameterState& p = s.parameters[it->second];
        p.tensors.push_back(i);
        if (t.numel() != 1 || !t.placement.empty() || t.pieces.empty())
            continue;
        const std::string first = scalarBytes(t.pieces.front(), maps);
        for (const Piece& piece : t.pieces)
            if (scalarBytes(piece, maps) != first)
                s.problems.push_back({ piece.file, t.name, "rank " + std::to_string(piece.rank) + " holds another value "
                                                           "than rank " + std::to_string(t.pieces.front().rank) });
        if (entry->second == "step")
            p.step = scalarValue(t.dtype, first);
    }
}

/// The parameter groups' hyper-parameters (the first group's), their parameter count, and the optimizer's kind.
void describeOptimizer(TrainingState& s)
{
    const PyRef groups = s.optimizer->skeleton ? s.optimizer->skeleton->get("param_groups") : nullptr;
    if (groups && groups->isSequence()) {
        s.paramGroups = groups->items.size();
        for (const auto& g : groups->items) {
            if (!g || g->kind != PyValue::Kind::Dict)
                continue;
            for (const auto& [key, value] : g->entries) {
                std::string name;
                if (!toString(key, name))
                    continue;
                if (name == "params") {
                    s.optimizerParameters += value && value->isSequence() ? static_cast<std::int64_t>(value->items.size()) : 0;
                } else if (&g == &groups->items.front()) {
                    s.hyperParameters.emplace_back(name, value && value->kind == PyValue::Kind::Tensor ? "tensor"
                                                                                                       : value->repr(2));
                }
            }
        }
    } else {
        s.problems.push_back({ s.actorDir, "", "the optimizer state has no param_groups list" });
    }
    std::set<std::string> keys;
    for (const auto& p : s.parameters)
        for (std::size_t i : p.tensors)
            keys.insert(stateEntry(s.optimizer->info.tensors[i].name)->second);
    if (keys.count("exp_avg") && keys.count("exp_avg_sq"))
        s.optimizerKind = keys.count("max_exp_avg_sq") ? "Adam/AdamW with amsgrad" : "Adam/AdamW";
    else if (keys.count("momentum_buffer"))
        s.optimizerKind = "SGD with momentum";
    else
        s.optimizerKind = keys.empty() ? "no per-parameter state yet" : "unknown";
    std::string list;
    for (const auto& k : keys)
        list += (list.empty() ? "" : ", ") + k;
    if (!list.empty())
        s.optimizerKind += " (" + list + ")";
}

/// The model's parameters in model.parameters() order: its tensors, each tied alias (a tensor whose bytes are an
/// earlier one's: torch.save keeps one storage for both) left out, as the optimizer never sees it twice.
std::vector<const TensorInfo*> modelParameters(const CheckpointInfo& model)
{
    std::vector<const TensorInfo*> params;
    std::set<std::tuple<std::string, std::uint64_t>> seen;
    for (const auto& t : model.tensors) {
        if (!t.pieces.empty() && !seen.emplace(t.pieces.front().file, t.pieces.front().dataOffset).second)
            continue;
        params.push_back(&t);
    }
    return params;
}

/// Each parameter's state against the model: as many parameters, each state tensor shaped like its parameter.
void matchModel(TrainingState& s, const CheckpointInfo& model)
{
    const auto params = modelParameters(model);
    if (s.optimizerParameters != static_cast<std::int64_t>(params.size()))
        s.problems.push_back({ s.actorDir, "", "the optimizer's param_groups list " + std::to_string(s.optimizerParameters)
                                                   + " parameters but the model has " + std::to_string(params.size())
                                                   + ": the optimizer state is not this model's" });
    for (auto& p : s.parameters) {
        if (p.index < 0 || p.index >= static_cast<std::int64_t>(params.size())) {
            s.problems.push_back({ s.actorDir, "state." + std::to_string(p.index),
                                   "state for parameter " + std::to_string(p.index) + ", but the model has "
                                       + std::to_string(params.size()) + " parameters" });
            continue;
        }
        const TensorInfo& param = *params[static_cast<std::size_t>(p.index)];
        p.parameter = param.name;
        for (std::size_t i : p.tensors) {
            const TensorInfo& t = s.optimizer->info.tensors[i];
            if (t.numel() == 1 && t.placement.empty())
                continue; // a scalar such as step
            if (t.shape != param.shape)
                s.problems.push_back({ s.actorDir, t.name, "has shape " + shapeToString(t.shape) + " but parameter "
                                                               + std::to_string(p.index) + " (" + printableText(param.name)
                                                               + ") has " + shapeToString(param.shape) });
        }
    }
}

/// "last_epoch 2, lr 0.0066": where the scheduler stands.
std::string schedulerPosition(const PyRef& scheduler)
{
    if (!scheduler || scheduler->kind != PyValue::Kind::Dict)
        return {};
    std::string text;
    if (auto epoch = scheduler->get("last_epoch"); epoch && epoch->isInt())
        text = "last_epoch " + std::to_string(epoch->integer);
    if (auto lr = scheduler->get("_last_lr"); lr && lr->isSequence() && !lr->items.empty() && lr->items[0]
        && lr->items[0]->kind == PyValue::Kind::Float) {
        std::ostringstream out;
        out << lr->items[0]->real;
        text += (text.empty() ? "lr " : ", lr ") + out.str();
    }
    return text;
}

/// The extra_state files of every rank: present, readable, and one scheduler state on all of them.
void readExtraState(TrainingState& s)
{
    bool any = false;
    std::error_code ec;
    for (int r = 0; r < s.worldSize && !any; ++r)
        any = fs::exists(fs::path(s.actorDir) / verlRankFileName("extra_state", s.worldSize, r), ec);
    if (!any)
        return;
    PyRef firstScheduler;
    for (int r = 0; r < s.worldSize; ++r) {
        const std::string path = (fs::path(s.actorDir) / verlRankFileName("extra_state", s.worldSize, r)).string();
        if (!fs::is_regular_file(path, ec)) {
            s.extraStateFiles.push_back("");
            s.problems.push_back({ path, "", "rank " + std::to_string(r) + " of " + std::to_string(s.worldSize)
                                                 + " has no extra state (scheduler and random state)" });
            continue;
        }
        s.extraStateFiles.push_back(path);
        auto file = TorchSaveFile::open(path);
        if (!file || !file->root() || file->root()->kind != PyValue::Kind::Dict) {
            s.problems.push_back({ path, "", file ? "does not hold a dict of extra state" : file.error().message });
            continue;
        }
        const PyRef scheduler = file->root()->get("lr_scheduler");
        if (r == 0) {
            s.lrScheduler = scheduler;
            s.rng = file->root()->get("rng") != nullptr;
            firstScheduler = scheduler;
        } else if (!sameValue(scheduler, firstScheduler)) {
            s.problems.push_back({ path, "lr_scheduler", "the scheduler state of rank " + std::to_string(r)
                                                             + " differs from rank 0's: the ranks did not save one run" });
        }
    }
    s.schedulerPosition = schedulerPosition(s.lrScheduler);
}

/// The dataloader state and the other roles of the step folder the actor folder is in.
void findStepFiles(TrainingState& s)
{
    const fs::path actor(s.actorDir);
    const fs::path step = actor.parent_path();
    std::error_code ec;
    // The dataloader state is the step's, carried with its actor (a critic's split leaves it to the actor's).
    if (actor.filename() != "critic" && fs::is_regular_file(step / "data.pt", ec) && !fs::is_symlink(step / "data.pt", ec))
        s.dataFile = (step / "data.pt").string();
    if (actor.filename() == "actor" && fs::is_directory(step / "critic", ec))
        s.otherRoles.push_back((step / "critic").string());
}

} // namespace

std::string verlRankFileName(const char* stem, int world, int rank)
{
    return std::string(stem) + "_world_size_" + std::to_string(world) + "_rank_" + std::to_string(rank) + ".pt";
}

Result<TrainingState> readTrainingState(const CheckpointInfo& model, int threads, Progress& progress)
{
    TrainingState s;
    if (model.layout == layout_names::kDcp) {
        // Only a folder whose scan set training state apart (torchtitan's) is read again for it.
        if (!model.optimizer.present() && !model.notes.count("training_state") && !model.notes.count("non_tensor_entries"))
            return s;
        auto entries = scanDcpTrainingEntries(model.root, threads, progress);
        TESSERA_TRY(entries);
        s.actorDir = model.root;
        s.worldSize = model.parallel.worldSize;
        if (entries->any()) {
            s.problems = entries->tensors.problems;
            s.dcp = std::move(*entries);
        }
        return s;
    }
    if (model.layout != layout_names::kVerlFsdp || model.parallel.worldSize < 1) {
        if (model.optimizer.present()) {
            s.actorDir = model.root;
            s.worldSize = model.parallel.worldSize;
            s.uncarried = "the optimizer state (" + std::to_string(model.optimizer.tensors.size()) + " tensors"
                + (model.optimizer.shardingType.empty() ? "" : ", " + model.optimizer.shardingType) + ")";
        }
        return s;
    }
    s.actorDir = model.root;
    s.worldSize = model.parallel.worldSize;
    findStepFiles(s);
    readExtraState(s);
    auto optimizer = scanVerlFsdpOptimizer(s.actorDir, s.worldSize, threads, progress);
    if (!optimizer) {
        if (optimizer.error().isCanceled())
            return optimizer.error();
        return s; // no optimizer files at all
    }
    s.optimizer = std::move(*optimizer);
    for (auto& p : s.optimizer->info.problems)
        s.problems.push_back(std::move(p));
    s.optimizer->info.problems.clear();
    if (!s.optimizer->skeleton)
        return s;
    groupParameters(s);
    describeOptimizer(s);
    matchModel(s, model);
    return s;
}

} // namespace tessera
