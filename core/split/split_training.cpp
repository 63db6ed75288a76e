// SPDX-License-Identifier: GPL-3.0-or-later
#include "split/split_training.h"

#include "io/byte_size.h"
#include "io/printable.h"
#include "split/split_sharded.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// "optimizer (optim_world_size_2_rank_R.pt) and scheduler and random state (extra_state_…)": what a split
/// without the training state would leave behind.
std::string whatWouldBeDropped(const TrainingState& s)
{
    if (!s.uncarried.empty())
        return s.uncarried;
    if (s.dcp)
        return "torchtitan's training state (" + std::to_string(s.dcp->tensors.tensors.size()) + " tensors and "
            + std::to_string(s.dcp->bytes.size()) + " other entries: optimizer, lr_scheduler, dataloader, train_state)";
    std::string what;
    if (s.hasOptimizer())
        what = "the optimizer state (optim_world_size_" + std::to_string(s.worldSize) + "_rank_R.pt)";
    if (s.hasExtraState())
        what += std::string(what.empty() ? "" : " and ") + "the scheduler and random state (extra_state_world_size_"
            + std::to_string(s.worldSize) + "_rank_R.pt)";
    return what;
}

/// The optimizer's tensors as whole-tensor copies in their own dtype.
Result<MergePlan> optimizerTensors(const CheckpointInfo& info)
{
    MergePlan plan;
    plan.checkpoint = info.root;
    plan.layout = info.layout;
    for (std::size_t i = 0; i < info.tensors.size(); ++i) {
        auto copy = planTensorCopy(info.tensors[i], i, std::nullopt);
        TESSERA_TRY(copy);
        plan.largestTensorBytes = std::max(plan.largestTensorBytes, copy->bytes);
        plan.totalBytes += copy->bytes;
        plan.tensors.push_back(std::move(*copy));
    }
    return plan;
}

/// A plain tensor of the state (a step count), the same on every rank: copied whole.
SplitTensor wholeTensor(const PlannedTensor& src, std::size_t index)
{
    SplitTensor out;
    out.globalShape = src.shape;
    out.spec.name = src.name;
    out.spec.dtype = src.dtype;
    out.spec.shape = src.shape;
    out.fragments.push_back({ index, Shape(src.shape.size(), 0), src.shape, Shape(src.shape.size(), 0), std::nullopt,
                              {}, {} });
    return out;
}

/// Rank r's optimizer file: the state dict's skeleton with its tensors cut for that rank.
Result<SplitFile> optimizerRankFile(const TrainingSplit& t, const SplitPlan& modelPlan, int r)
{
    SplitFile file;
    file.rank = r;
    file.name = verlRankFileName("optim", modelPlan.worldSize, r);
    file.archiveName = file.name.substr(0, file.name.size() - 3);
    file.kind = SplitFile::Kind::StateDict;
    file.tree = t.state.optimizer->skeleton;
    for (std::size_t i = 0; i < t.optimizer.tensors.size(); ++i) {
        const PlannedTensor& src = t.optimizer.tensors[i];
        auto tensor = t.state.optimizer->info.tensors[i].placement.empty() ? Result<SplitTensor>(wholeTensor(src, i))
                                                                           : fsdpRankTensor(src, i, modelPlan, r, false);
        TESSERA_TRY(tensor);
        file.bytes += tensor->spec.storageBytes();
        file.tensors.push_back(std::move(*tensor));
    }
    return file;
}

/// torchtitan keeps one dataloader state per data-parallel rank and refuses one saved at another degree.
bool isDataloaderEntry(const std::string& fqn) { return fqn.compare(0, 11, "dataloader.") == 0; }

/// Rank r's training file of a DCP split: its chunk of every training tensor (a 0-dim one on rank 0 alone).
Result<SplitFile> dcpTrainingFile(const TrainingSplit& t, const SplitPlan& modelPlan, int r)
{
    SplitFile file;
    file.rank = r;
    file.name = (modelPlan.dcpFolder.empty() ? "" : modelPlan.dcpFolder + "/") + "__" + std::to_string(r) + "_1.distcp";
    file.kind = SplitFile::Kind::DcpItems;
    file.archiveName = "archive";
    for (std::size_t i = 0; i < t.optimizer.tensors.size(); ++i) {
        const PlannedTensor& src = t.optimizer.tensors[i];
        if (src.shape.empty() && r != 0)
            continue;
        auto tensor = src.shape.empty() ? Result<SplitTensor>(wholeTensor(src, i)) : dcpRankTensor(src, i, modelPlan, r);
        TESSERA_TRY(tensor);
        file.bytes += tensor->spec.storageBytes();
        file.tensors.push_back(std::move(*tensor));
    }
    return file;
}

using RankFileMaker = Result<SplitFile> (*)(const TrainingSplit&, const SplitPlan&, int);

/// The training tensors of `source` planned as copies in their own dtype, and laid out in one file per new rank
/// by `rankFile`, on the model plan's mesh.
Status layOutTrainingFiles(TrainingSplit& t, const CheckpointInfo& source, const SplitPlan& modelPlan,
                           RankFileMaker rankFile)
{
    t.files.format = modelPlan.format;
    t.files.worldSize = modelPlan.worldSize;
    t.files.mesh = modelPlan.mesh;
    t.files.meshDimNames = modelPlan.meshDimNames;
    t.files.meshRanks = modelPlan.meshRanks;
    t.files.dcpFolder = modelPlan.dcpFolder;
    auto tensors = optimizerTensors(source);
    TESSERA_TRY(tensors);
    t.optimizer = std::move(*tensors);
    for (int r = 0; r < modelPlan.worldSize; ++r) {
        auto file = rankFile(t, modelPlan, r);
        TESSERA_TRY(file);
        t.bytes += file->bytes;
        t.files.files.push_back(std::move(*file));
    }
    t.files.totalBytes = t.bytes;
    t.files.largestTensorBytes = t.optimizer.largestTensorBytes;
    return Status::success();
}

Result<std::shared_ptr<const TrainingSplit>> planDcpTrainingSplit(TrainingState state, const SplitPlan& modelPlan)
{
    auto t = std::make_shared<TrainingSplit>();
    t->state = std::move(state);
    const DcpTrainingEntries& entries = *t->state.dcp;
    const int world = modelPlan.worldSize;
    TESSERA_TRY(layOutTrainingFiles(*t, entries.tensors, modelPlan, dcpTrainingFile));
    const bool sameDegree = world == t->state.worldSize;
    std::size_t dataloader = 0;
    for (const auto& b : entries.bytes) {
        if (!sameDegree && isDataloaderEntry(b.fqn)) {
            ++dataloader;
            continue;
        }
        t->bytes += b.length;
        t->bytesEntries.push_back(b);
    }
    t->notes.push_back(std::to_string(entries.tensors.tensors.size()) + " training-state tensors (optimizer and others) "
                       "resharded for " + std::to_string(world) + " ranks into __R_1.distcp, and "
                       + std::to_string(t->bytesEntries.size()) + " other entries (scheduler, hyper-parameters, train state) "
                       "carried as they are");
    if (dataloader)
        t->notes.push_back(std::to_string(dataloader) + " dataloader entries not carried: they are per data-parallel "
                           "rank of " + std::to_string(t->state.worldSize) + " ranks, which torchtitan does not "
                           "reshard; the data loader starts over");
    return std::shared_ptr<const TrainingSplit>(std::move(t));
}

} // namespace

Status trainingStateRefusal(const TrainingState& s, const SplitPlan& modelPlan, bool inParts, bool fusedLora)
{
    if (!s.any())
        return Status::success();
    const std::string dropped = whatWouldBeDropped(s);
    const std::string modelOnly = "; pass --model_only to write the model alone (a run resumes from it with "
        + std::string(kModelOnlyResumeSetting) + ", restarting the optimizer and the schedule)";
    if (!s.uncarried.empty())
        return makeError(s.actorDir + " holds " + dropped + ", which split does not carry from this layout"
                         + modelOnly);
    const SplitFormat carrier = s.dcp ? SplitFormat::Dcp : SplitFormat::Fsdp;
    if (modelPlan.format != carrier)
        return makeError(s.actorDir + " holds " + dropped + ", which --format " + splitFormatName(modelPlan.format)
                         + " cannot carry (only --format " + splitFormatName(carrier) + " does)" + modelOnly);
    if (inParts)
        return makeError(s.actorDir + " holds " + dropped + ", which a split in parts (--part) does not carry"
                         + modelOnly);
    if (fusedLora)
        return makeError(s.actorDir + " holds " + dropped + " of the LoRA adapter's parameters, but the split "
                         "writes the fused model, which has other parameters" + modelOnly);
    if (!s.problems.empty()) {
        std::string message = s.actorDir + ": the training state cannot be carried:";
        for (std::size_t i = 0; i < s.problems.size() && i < 12; ++i)
            message += "\n  " + s.problems[i].text();
        if (s.problems.size() > 12)
            message += "\n  … and " + std::to_string(s.problems.size() - 12) + " more";
        return makeError(message + "\n" + modelOnly.substr(2));
    }
    return Status::success();
}

Result<std::shared_ptr<const TrainingSplit>> planTrainingSplit(TrainingState state, const SplitPlan& modelPlan,
                                                               const std::string& targetDir)
{
    if (state.dcp)
        return planDcpTrainingSplit(std::move(state), modelPlan);
    auto t = std::make_shared<TrainingSplit>();
    t->state = std::move(state);
    const TrainingState& s = t->state;
    const int world = modelPlan.worldSize;
    if (s.hasOptimizer()) {
        TESSERA_TRY(layOutTrainingFiles(*t, s.optimizer->info, modelPlan, optimizerRankFile));
        t->notes.push_back("optimizer: " + s.optimizerKind + ", " + std::to_string(s.parameters.size())
                           + " parameters' state resharded for " + std::to_string(world) + " ranks ("
                           + formatBytes(t->bytes) + ")");
    }
    if (s.hasExtraState()) {
        std::string from;
        for (int r = 0; r < world; ++r) {
            const int old = r % s.worldSize;
            t->extraState.push_back({ s.extraStateFiles[static_cast<std::size_t>(old)], old,
                                      verlRankFileName("extra_state", world, r) });
            if (r < 8)
                from += (r ? ", " : "") + std::to_string(r) + "←" + std::to_string(old);
        }
        t->notes.push_back(std::string("scheduler") + (s.schedulerPosition.empty() ? "" : " (" + s.schedulerPosition + ")")
                           + " and random state: new rank ← old rank " + from + (world > 8 ? ", …" : "")
                           + " (rank r takes old rank r mod " + std::to_string(s.worldSize) + "'s random state)");
    }
    if (s.hasOptimizer() != s.hasExtraState())
        t->notes.push_back(std::string("the run saved no ") + (s.hasOptimizer() ? "extra state" : "optimizer state")
                           + ": resume it with checkpoint.load_contents=[model,"
                           + (s.hasOptimizer() ? "optimizer" : "extra") + "]");
    const fs::path target = fs::path(targetDir).lexically_normal();
    const fs::path actor = target.filename().empty() ? target.parent_path() : target;
    const bool runLayout = modelPlan.runIteration.has_value();
    if (!s.dataFile.empty() && runLayout) {
        t->dataSource = s.dataFile;
        t->dataTarget = (actor.parent_path() / "data.pt").string();
        t->notes.push_back("dataloader state: " + s.dataFile + " goes to " + t->dataTarget);
    } else if (!s.dataFile.empty()) {
        t->notes.push_back("dataloader state " + s.dataFile + " not carried: the target is not a run's "
                           "global_step_N/actor folder; copy it beside the target's actor folder yourself");
    }
    for (const auto& role : s.otherRoles)
        t->notes.push_back(role + " was left as it is: reshard it with its own split (--local_dir " + role + ")");
    return std::shared_ptr<const TrainingSplit>(std::move(t));
}

void attachTrainingSplit(SplitPlan& plan, std::shared_ptr<const TrainingSplit> training)
{
    std::error_code ec;
    std::uint64_t extraBytes = 0;
    for (const auto& e : training->extraState)
        extraBytes += fs::file_size(e.source, ec) + 4096;
    // Each optimizer file: its storages, and per tensor a record and its pickle (a DTensor's is about 1.2 kB).
    for (const auto& f : training->files.files)
        plan.diskBytes += f.bytes + f.tensors.size() * 1400 + 4096;
    plan.diskBytes += extraBytes;
    const std::uint64_t optimizerLargest = training->optimizer.largestTensorBytes;
    if (optimizerLargest > plan.largestTensorBytes) {
        plan.memoryBytes += 2 * (optimizerLargest - plan.largestTensorBytes);
        plan.largestTensorBytes = optimizerLargest;
    }
    plan.training = std::move(training);
}

} // namespace tessera
