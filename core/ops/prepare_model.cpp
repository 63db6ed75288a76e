// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/prepare_model.h"

#include "formats/scan.h"
#include "mapping/hf_parameter_check.h"
#include "ops/vocabulary.h"
#include "parallel.h"

#include <chrono>
#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

std::string normalPath(const std::string& path)
{
    if (path.empty())
        return path;
    std::error_code ec;
    const fs::path absolute = fs::absolute(path, ec);
    return (ec ? fs::path(path) : absolute).lexically_normal().string();
}

bool isDefaultCheck(const ParameterCheckOptions& o)
{
    return o.ignoreMissing.empty() && o.strict && !o.valueModel && !o.tieWordEmbeddings;
}

/// A scan of `path` in `context` that reads as scanCheckpoint(path, {hfModelPath}) would: the same path, and the
/// same config folder (given the same way, or found where the request names it).
const ScannedCheckpoint* reusableScan(const PrepareContext& context, const std::string& path,
                                      const std::string& hfModelPath, bool needUnchecked)
{
    for (const auto& s : context.scans) {
        if (!s.info || normalPath(s.path) != normalPath(path) || (needUnchecked && s.parametersChecked))
            continue;
        const bool sameConfig = hfModelPath.empty() ? s.hfModelPath.empty()
                                                    : normalPath(hfModelPath) == normalPath(s.info->hfConfigDir);
        if (sameConfig)
            return &s;
    }
    return nullptr;
}

void warn(PreparedModel& m, const std::string& text) { m.messages.push_back({ PrepareMessage::Kind::Warning, text }); }
void note(PreparedModel& m, const std::string& text) { m.messages.push_back({ PrepareMessage::Kind::Note, text }); }
/// Stops the prepare with `error`; false, for the steps to return.
bool refuse(PreparedModel& m, Error error, bool usage = false)
{
    m.refusal = Refusal { std::move(error), usage };
    return false;
}

/// `path` as scanCheckpoint() reads it with `hfModelPath`: reused from the context when it can be, else read and
/// kept in `m.scans`. `needUnchecked`: a scan without the default parameter check.
Result<ScannedCheckpoint> scanned(PreparedModel& m, const PrepareContext& context, const std::string& path,
                                  const std::string& hfModelPath, bool needUnchecked)
{
    if (const auto* reuse = reusableScan(context, path, hfModelPath, needUnchecked))
        return *reuse;
    ScanOptions options;
    options.hfModelPath = hfModelPath;
    options.threads = static_cast<int>(m.settings.threads);
    auto info = scanCheckpoint(path, options, context.progress ? *context.progress : silentProgress());
    TESSERA_TRY(info);
    ScannedCheckpoint scan { std::make_shared<const CheckpointInfo>(std::move(*info)), path, hfModelPath, false };
    m.scans.push_back(scan);
    return scan;
}

/// --weights_from optimizer: the model its reader made of the optimizer's master weights, or why there is none.
bool useMasterWeights(PreparedModel& m, const CheckpointInfo& scanned)
{
    const OptimizerState& optimizer = scanned.optimizer;
    if (!optimizer.masterWeights) {
        const std::string why = !optimizer.noMasterWeights.empty()
            ? optimizer.noMasterWeights
            : "it is a " + scanned.layout + " checkpoint; --weights_from optimizer reads the fp32 master weights "
              "Megatron's optimizer keeps in a torch_dist checkpoint (optimizer.state.fp32_param.*)";
        return refuse(m, makeError("--weights_from optimizer: " + m.settings.localDir + ": " + why));
    }
    m.checkpoint = optimizer.masterWeights;
    note(m, "the weights are the optimizer's fp32 master weights (optimizer.state.fp32_param.*), not the model keys");
    for (const auto& w : m.checkpoint->warnings)
        warn(m, w);
    return true;
}

/// --local_dir read and checked against what its config.json expects; false (with the refusal set) when it stops.
bool readCheckpoint(PreparedModel& m, const ModelRequest& request, const ModelPurpose& purpose,
                    const PrepareContext& context)
{
    const auto& s = m.settings;
    const bool defaultCheck = isDefaultCheck(s.check);
    auto scan = scanned(m, context, s.localDir, request.hfModelPath.value_or(""), !defaultCheck);
    if (!scan)
        return refuse(m, scan.error());
    const std::string& layout = scan->info->layout;
    // The guides run `test --backend fsdp` on an already merged folder: comparing that needs no backend.
    const bool mergedFolder = purpose.mergedFolderIsFine && isHuggingFaceLayout(layout);
    if (mergedFolder && s.backend != "auto")
        note(m, s.localDir + " is already a Hugging Face model; it is compared as it is (--backend " + s.backend
                 + " is not needed)");
    if (!backendReads(s.backend, layout) && !mergedFolder)
        return refuse(m, makeError("--backend " + s.backend + " was given but " + s.localDir + " is a " + layout
                                   + " checkpoint (use --backend auto)"));
    if (purpose.huggingFaceOnly && !isHuggingFaceLayout(layout))
        return refuse(m, makeError(s.localDir + " is a " + layout + " checkpoint, not a Hugging Face model: give it "
                                   "as --local_dir"));
    if (s.weightsFrom == WeightsSource::Optimizer)
        return useMasterWeights(m, *scan->info);
    // Hugging Face names: every parameter config.json expects must be there (Megatron's mapping checks its own).
    if ((scan->parametersChecked && defaultCheck) || isMegatronLayout(layout)) {
        m.checkpoint = scan->info;
    } else {
        CheckpointInfo checked = *scan->info;
        if (const Status status = checkExpectedParameters(checked, s.check); !status)
            return refuse(m, status.error(), true);
        m.checkpoint = std::make_shared<const CheckpointInfo>(std::move(checked));
    }
    for (const auto& w : m.checkpoint->warnings)
        warn(m, w);
    return true;
}

/// Megatron names mapped to Hugging Face ones; the result merges like any other checkpoint.
bool mapNames(PreparedModel& m, const PrepareContext& context)
{
    if (!isMegatronLayout(m.checkpoint->layout)) {
        m.input = m.checkpoint;
        return true;
    }
    MappingOptions options = m.settings.mapping;
    if (context.rules) {
        options.userRulesText = context.rules->text;
        if (options.userRulesFile.empty())
            options.userRulesFile = context.rules->origin;
    }
    auto mapped = mapMegatronToHf(*m.checkpoint, options);
    if (!mapped)
        return refuse(m, mapped.error());
    for (const auto& w : mapped->warnings)
        warn(m, w);
    m.mapping = std::make_shared<const MappingResult>(std::move(*mapped));
    // The merge input lives inside the mapping; the aliasing pointer keeps the whole mapping alive with it.
    m.input = std::shared_ptr<const CheckpointInfo>(m.mapping, &m.mapping->mapped);
    return true;
}

/// --base_model read as a Hugging Face model of its own, checked as the checkpoint is.
bool readBaseModel(PreparedModel& m, const std::string& path, const PrepareContext& context)
{
    auto scan = scanned(m, context, path, "", true);
    if (!scan)
        return refuse(m, scan.error().withContext("--base_model"));
    auto read = baseModelAsRead(*scan->info, path, m.input->hfConfigDir);
    if (!read)
        return refuse(m, read.error());
    CheckpointInfo base = std::move(*read);
    if (const Status checked = checkExpectedParameters(base, m.settings.check); !checked)
        return refuse(m, checked.error(), true);
    for (const auto& w : base.warnings)
        warn(m, "--base_model: " + w);
    m.base = std::make_shared<const CheckpointInfo>(std::move(base));
    return true;
}

/// A LoRA checkpoint's adapter read (with its base model); the LoRA flags refused for other checkpoints.
bool readAdapter(PreparedModel& m, const ModelRequest& request, const PrepareContext& context)
{
    if (!hasLoraTensors(*m.input)) {
        const char* flag = request.baseModel ? "--base_model"
            : request.loraAlpha              ? "--lora_alpha"
            : request.usePeft                ? "--use_peft"
                                             : nullptr;
        if (const Status applies = loraFlagsApply(*m.input, m.settings.localDir, flag); !applies)
            return refuse(m, applies.error(), true);
        return true;
    }
    if (request.baseModel && !readBaseModel(m, *request.baseModel, context))
        return false;
    auto read = readLoraCheckpoint(*m.input, m.settings.lora, m.base.get());
    if (!read)
        return refuse(m, read.error());
    note(m, read->summary);
    for (const auto& n : read->notes)
        note(m, n);
    m.lora = std::make_shared<const LoraCheckpoint>(std::move(*read));
    return true;
}

double secondsSince(Clock::time_point& start)
{
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - start).count();
    start = now;
    return seconds;
}

} // namespace

std::vector<MergeOutput> PreparedModel::outputs() const
{
    if (plan)
        return { MergeOutput { input.get(), &*plan, "" } };
    if (loraPlans)
        return loraPlans->outputs(*lora);
    return {};
}

PreparedModel readModel(const ModelRequest& request, const ModelSettings& settings, const ModelPurpose& purpose,
                        const PrepareContext& context)
{
    PreparedModel m;
    m.settings = settings;
    auto start = Clock::now();
    if (!readCheckpoint(m, request, purpose, context))
        return m;
    m.stageSeconds.emplace_back("scan", secondsSince(start));
    if (!mapNames(m, context))
        return m;
    if (m.mapping)
        m.stageSeconds.emplace_back("map", secondsSince(start));
    (void)readAdapter(m, request, context);
    return m;
}

void planModel(PreparedModel& m, MergeOptions options, LoraOutput loraOutput)
{
    if (m.refusal)
        return;
    const auto start = Clock::now();
    options.threads = resolveThreads(static_cast<int>(m.settings.threads));
    options.hfConfigDir = m.settings.mapping.configDir;
    options.forceTieWordEmbeddings = m.settings.check.tieWordEmbeddings;
    m.options = options;
    if (m.lora) {
        auto plans = planLoraMerge(*m.lora, options, loraOutput);
        if (!plans) {
            refuse(m, plans.error());
            return;
        }
        m.loraPlans = std::move(*plans);
    } else {
        auto plan = planMerge(*m.input, options);
        if (!plan) {
            refuse(m, plan.error());
            return;
        }
        m.plan = std::move(*plan);
    }
    m.stageSeconds.emplace_back("plan", std::chrono::duration<double>(Clock::now() - start).count());
}

} // namespace tessera
