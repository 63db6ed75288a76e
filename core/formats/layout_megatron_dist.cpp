// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron-core torch_dist checkpoints: a PyTorch DCP folder written by dist_checkpointing, plus metadata.json
// (the backend) and, up to core v0.18, common.pt (args and other non-sharded state). The DCP keys already are
// global tensors (homogeneous layers stacked on a leading layer axis), so this reader adds Megatron's facts on
// top of the DCP entries, sets the optimizer's state apart (with the model its master weights make, when they can)
// and removes what is not model weights.

#include "formats/layouts.h"
#include "formats/megatron_config.h"
#include "formats/megatron_names.h"
#include "formats/megatron_optimizer.h"
#include "io/regex.h"
#include "io/text_file.h"
#include "pickle/torch_save.h"
#include "formats/layout_registry.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// RNG state, TE metadata and the common state share the archive with the weights (and the optimizer's state,
/// which separateMegatronOptimizer() takes out first; an optimizer key of no layout it knows is dropped here).
bool isNonModelKey(const std::string& name)
{
    static const Regex chainedOptimizer = Regex::fixed(R"(chained_\d+\.optimizer\..*)");
    return name.rfind("optimizer.", 0) == 0 || chainedOptimizer.fullMatch(name)
           || name.rfind("rng_state", 0) == 0 || name.rfind("common_state", 0) == 0 || isMegatronExtraState(name);
}

/// The decoder's stacked keys: `decoder.layers.<param>` (`language_model.decoder.layers.<param>` in a
/// vision-language model) with no layer number.
bool isStackedLayerKey(const std::string& name)
{
    return (name.rfind("decoder.layers.", 0) == 0 || name.rfind("language_model.decoder.layers.", 0) == 0)
        && !parseMegatronLayerName(name);
}

std::string pyText(const PyRef& value)
{
    std::string s;
    if (toString(value, s))
        return s;
    return value ? value->repr(2) : std::string();
}

/// metadata.json names the backend; only torch_dist is a DCP folder.
void readBackend(CheckpointInfo& info)
{
    const fs::path metaJson = fs::path(info.root) / "metadata.json";
    const auto text = readTextFile(metaJson.string());
    const auto json = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    if (!text) {
        info.problems.push_back({ metaJson.string(), "", text.error().message });
    } else if (json.is_discarded() || !json.is_object()) {
        info.problems.push_back({ metaJson.string(), "", "not a JSON object (dist_checkpointing writes it last, "
                                                         "so the save may not have finished)" });
    } else if (auto it = json.find("sharded_backend"); it != json.end() && it->is_string()) {
        const std::string backend = it->get<std::string>();
        info.notes["sharded_backend"] = backend;
        if (backend != "torch_dist")
            info.problems.push_back({ metaJson.string(), "", "sharded_backend is '" + backend
                                                                 + "'; Tessera reads torch_dist checkpoints only" });
    }
}

/// common.pt: rank 0's non-sharded state (args, iteration, content_metadata); absent from core v0.19 on. Its args
/// fill in what `config` lacks.
void readCommonState(CheckpointInfo& info, MegatronConfig& config)
{
    const fs::path commonPath = fs::path(info.root) / "common.pt";
    std::error_code ec;
    if (!fs::is_regular_file(commonPath, ec))
        return;
    auto common = TorchSaveFile::open(commonPath.string());
    if (!common) {
        info.problems.push_back({ commonPath.string(), "", common.error().message });
        return;
    }
    info.files.push_back(common->path());
    const PyRef& root = common->root();
    if (root && root->kind == PyValue::Kind::Dict) {
        if (auto args = root->get("args"))
            for (auto& conflict : config.mergeFrom(megatronConfigFromArgs(args, "args in common.pt")))
                info.problems.push_back({ commonPath.string(), "", conflict });
        for (const char* key : { "iteration", "checkpoint_version", "content_metadata" })
            if (auto value = root->get(key))
                info.notes[key] = pyText(value);
        readMegatronOptimizerSharding(root, info.optimizer);
    }
}

/// Keeps model weights only; what is dropped is counted, and its problems do not concern a weights merge.
void keepModelWeights(CheckpointInfo& info)
{
    std::set<std::string> dropped;
    std::vector<TensorInfo> kept;
    for (auto& t : info.tensors) {
        if (isNonModelKey(t.name))
            dropped.insert(t.name);
        else
            kept.push_back(std::move(t));
    }
    info.tensors = std::move(kept);
    std::vector<Problem> problems;
    for (auto& p : info.problems)
        if (!dropped.count(p.tensor))
            problems.push_back(std::move(p));
    info.problems = std::move(problems);
    if (!dropped.empty())
        info.notes["dropped_non_model_tensors"] = std::to_string(dropped.size());
}

/// A folder without model keys, as verl writes dist_ckpt/ when a bridge saved the weights to Hugging Face.
void refuseEmptyModel(CheckpointInfo& info)
{
    if (!info.tensors.empty())
        return;
    std::string message = "the checkpoint holds no model weights (only optimizer or RNG state); when verl saves "
                          "through mbridge, the weights are Hugging Face safetensors in the huggingface/ folder "
                          "beside it";
    if (info.optimizer.masterWeights)
        message += "; its optimizer keeps the fp32 master weights (optimizer.state.fp32_param.*): merge them with "
                   "--weights_from optimizer";
    info.problems.push_back({ info.root, "", message });
}

/// PP and VPP are invisible on disk (every stage writes its layers at their global offsets); TP is in the chunks.
void setParallelSizes(CheckpointInfo& info, const MegatronConfig& config)
{
    auto put = [](int& out, const MegatronSetting& s) {
        if (s && *s > 0)
            out = static_cast<int>(*s);
    };
    put(info.parallel.tensorParallel, config.tensorParallel);
    put(info.parallel.pipelineParallel, config.pipelineParallel);
    put(info.parallel.virtualPipeline, config.virtualPipeline);
    put(info.parallel.expertParallel, config.expertParallel);
}

/// Each weight's name and global shape against the config; a stacked layer key's leading axis is the layer count.
void checkAgainstConfig(CheckpointInfo& info, const MegatronConfig& config, const std::string& dir)
{
    const std::string configFile = config.sources.empty() ? info.root : config.sources.front();
    for (const auto& t : info.tensors) {
        if (const std::string why = megatronIndexProblem(t.name); !why.empty()) {
            info.problems.push_back({ (fs::path(dir) / ".metadata").string(), t.name, why });
            continue;
        }
        // transformer_config.json describes the language model; a vision tower has sizes of its own.
        if (t.name.rfind("vision_model.", 0) == 0)
            continue;
        if (!isStackedLayerKey(t.name))
            if (auto m = checkShapeAgainstConfig(t.name, t.shape, 0, config))
                info.problems.push_back({ configFile, t.name,
                                          "global shape " + shapeToString(t.shape) + ": " + m->message });
        if (!isStackedLayerKey(t.name))
            continue;
        if (config.numLayers && (t.shape.empty() || t.shape[0] != *config.numLayers))
            info.problems.push_back({ info.root, t.name, "the stacked layer axis has "
                                                             + (t.shape.empty() ? std::string("no entries")
                                                                                : std::to_string(t.shape[0]))
                                                             + " layers but " + config.numLayers.describe("num_layers") });
        if (auto m = checkShapeAgainstConfig(t.name, t.shape, 1, config))
            info.problems.push_back({ configFile, t.name,
                                      "global shape " + shapeToString(t.shape) + ": " + m->message });
    }
}

/// The model read from the optimizer's fp32 master weights, described once here with the same checks as the model
/// keys (`--weights_from optimizer` takes it), or why it cannot be: info.optimizer.masterWeights or noMasterWeights.
/// `info` holds the model keys and the folder's own problems, not yet checked against the config.
void readMasterWeights(CheckpointInfo& info, const MegatronConfig& config, const std::string& dir)
{
    OptimizerState& optimizer = info.optimizer;
    std::vector<std::string> modelKeys;
    std::set<std::string> modelNames;
    for (const auto& t : info.tensors) {
        modelKeys.push_back(t.name);
        modelNames.insert(t.name);
    }
    optimizer.noMasterWeights = megatronMasterWeightsRefusal(info, modelKeys);
    if (!optimizer.noMasterWeights.empty())
        return;
    CheckpointInfo weights;
    weights.layout = info.layout;
    weights.root = info.root;
    weights.hfConfigDir = info.hfConfigDir;
    weights.parallel = info.parallel;
    weights.files = info.files;
    weights.warnings = info.warnings;
    weights.notes = info.notes;
    weights.notes["weights_from"] = "optimizer: the fp32 master weights (optimizer.state.fp32_param.*)";
    for (const auto& p : info.problems) // the folder's own, not the model keys'
        if (!modelNames.count(p.tensor))
            weights.problems.push_back(p);
    std::map<std::string, std::string> keyOf; // model key → the optimizer key it was read from
    for (const auto& t : optimizer.tensors) {
        const std::string key = megatronMasterWeightKey(t.name);
        if (key.empty())
            continue;
        if (!keyOf.emplace(key, t.name).second) {
            weights.problems.push_back({ info.root, key, "two optimizer keys hold its master weights: " + keyOf[key]
                                                             + " and " + t.name });
            continue;
        }
        TensorInfo renamed = t;
        renamed.name = key;
        weights.tensors.push_back(std::move(renamed));
    }
    for (const auto& p : optimizer.problems)
        if (const std::string key = megatronMasterWeightKey(p.tensor); !key.empty())
            weights.problems.push_back({ p.file, key, p.message });
    checkAgainstConfig(weights, config, dir);
    optimizer.masterWeights = std::make_shared<const CheckpointInfo>(std::move(weights));
}

} // namespace

Result<CheckpointInfo> scanMegatronDist(const std::string& dir, int threads, Progress& progress)
{
    std::vector<std::string> nonTensorEntries;
    auto scanned = scanDcpEntries(dir, threads, progress, nonTensorEntries);
    TESSERA_TRY(scanned);
    CheckpointInfo info = std::move(*scanned);
    info.layout = layout_names::kMegatronDist;
    readBackend(info);
    MegatronConfig config = loadTransformerConfig(info);
    readCommonState(info, config);
    separateMegatronOptimizer(info);
    keepModelWeights(info);
    setParallelSizes(info, config);
    if (config.numLayers)
        info.notes["num_layers"] = std::to_string(*config.numLayers);
    readMasterWeights(info, config, dir);
    checkAgainstConfig(info, config, dir);
    refuseEmptyModel(info);
    return info;
}

} // namespace tessera
