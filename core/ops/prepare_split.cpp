// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/prepare_split.h"

#include "ops/target_entries.h"
#include "ops/vocabulary.h"
#include "publish/staged_run.h"
#include "split/split_training.h"

namespace tessera {

namespace {

void refuse(PreparedSplit& p, Error error, bool usage = false) { p.refusal = Refusal { std::move(error), usage }; }

/// The layout of the model, as the options ask.
void planLayout(PreparedSplit& p, const PrepareContext& context)
{
    SplitOptions options = p.settings.options;
    const std::string target = p.request.targetDir.value_or("");
    if (options.format != SplitFormat::Dcp)
        options.runIteration = verlRunIteration(target);
    // A Hugging Face folder keeps its keys sorted by name: its files list them in the model's order instead.
    options.moduleOrder = isHuggingFaceLayout(p.model.primaryInfo().layout);
    if (context.rules) {
        options.userRulesText = context.rules->text;
        if (options.userRulesFile.empty())
            options.userRulesFile = context.rules->origin;
    }
    auto plan = planSplit(p.model.primary(), options);
    if (!plan)
        return refuse(p, plan.error());
    p.plan = std::move(*plan);
}

/// The training state beside the source, carried with the model, refused, or left behind with --model_only.
void planTraining(PreparedSplit& p, const PrepareContext& context)
{
    // The checkpoint as read (a Megatron one before its names are mapped): its training state is beside its files.
    const CheckpointInfo& source = p.model.checkpoint ? *p.model.checkpoint : p.model.primaryInfo();
    auto state = readTrainingState(source, 0, context.progress ? *context.progress : silentProgress());
    if (!state)
        return refuse(p, state.error());
    if (!state->any())
        return;
    if (p.request.modelOnly) {
        p.plan->warnings.push_back("--model_only: the training state beside the checkpoint is not written; resume "
                                   "the run with " + std::string(kModelOnlyResumeSetting)
                                   + " (the optimizer and the schedule restart)");
        return;
    }
    const bool fusedLora = p.model.lora || !source.loraDeltas.empty();
    auto refusal = trainingStateRefusal(*state, *p.plan, p.settings.part.has_value(), fusedLora);
    if (!refusal)
        return refuse(p, refusal.error());
    auto training = planTrainingSplit(std::move(*state), *p.plan, p.request.targetDir.value_or(""));
    if (!training)
        return refuse(p, training.error());
    if (p.model.settings.dtype)
        // torch's optimizer.load_state_dict() casts each moment to its parameter's dtype: a resumed run is not the
        // run that was saved.
        p.plan->warnings.push_back("--dtype " + std::string(torchName(*p.model.settings.dtype)) + " converts the "
                                   "model while the optimizer state keeps its own dtype: a run resumed from it "
                                   "trains in the new dtype, and torch casts the moments to it when loading");
    attachTrainingSplit(*p.plan, std::move(*training));
}

/// What the split would refuse of its target, as a dry run checks it.
void checkTarget(PreparedSplit& p)
{
    const std::string target = p.request.targetDir.value_or("");
    if (target.empty()) {
        p.target = makeError("--target_dir is required");
        return;
    }
    if (p.settings.part)
        return;
    p.target = checkSplitTarget(p.model.primaryInfo(), p.model.primary(), *p.plan, target);
    if (p.target)
        p.target = StagedRun::checkFree(target);
    if (p.target)
        p.otherFiles = targetEntryNames(target);
}

} // namespace

PreparedSplit prepareSplit(const SplitRequest& request, const PrepareContext& context, const EnvLookup& env)
{
    PreparedSplit p;
    p.request = request;
    auto settings = splitSettings(request, env);
    if (!settings) {
        refuse(p, settings.error(), true);
        return p;
    }
    p.settings = std::move(settings->second);
    ModelRequest model = request;
    model.localDir = request.source();
    ModelPurpose purpose;
    purpose.huggingFaceOnly = request.hfDir.has_value();
    p.model = readModel(model, settings->first, purpose, context);
    MergeOptions options;
    options.dtype = settings->first.dtype;
    planModel(p.model, options, LoraOutput::Fused); // a LoRA checkpoint splits as its fused model
    if (p.model.refusal)
        p.refusal = p.model.refusal;
    else
        planLayout(p, context);
    if (!p.refusal)
        planTraining(p, context);
    if (!p.refusal)
        checkTarget(p);
    return p;
}

Result<SplitOutcome> runPreparedSplit(const PreparedSplit& p, const SplitRunOptions& options)
{
    if (p.refusal)
        return p.refusal->error;
    return runSplit(p.model.primaryInfo(), p.model.primary(), *p.plan, p.request.targetDir.value_or(""), options);
}

} // namespace tessera
