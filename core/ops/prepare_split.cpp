// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/prepare_split.h"

#include "ops/target_entries.h"
#include "ops/vocabulary.h"
#include "publish/staged_run.h"

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
