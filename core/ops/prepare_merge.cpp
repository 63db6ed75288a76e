// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/prepare_merge.h"

#include "io/path_kinds.h"
#include "ops/target_entries.h"
#include "parallel.h"
#include "publish/staged_run.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

namespace {

void refuse(PreparedMerge& p, Error error, bool usage = false) { p.refusal = Refusal { std::move(error), usage }; }

/// Refuses a --peft_target_dir the adapter cannot be published into after the fused model: the target itself or a
/// folder inside it (the two would replace or mix each other's files), a file, a folder that cannot be written,
/// weight or tokenizer files of another model there.
Status checkAdapterTarget(const std::string& adapterDir, const std::string& target, const MergeOutput& adapter,
                          bool fusedModel)
{
    if (adapterDir.empty())
        return makeError("--peft_target_dir: needs a folder name (it is empty)");
    // Symbolic links resolved, so that a link to the target is the target.
    auto resolved = [](const std::string& path) {
        std::error_code ec;
        const fs::path canonical = fs::weakly_canonical(normalTarget(path), ec);
        return ec ? normalTarget(path) : canonical;
    };
    const fs::path a = resolved(adapterDir), t = resolved(target);
    if (fusedModel) {
        const fs::path rel = a.lexically_relative(t);
        if (a == t || (!rel.empty() && *rel.begin() != ".."))
            return makeError("--peft_target_dir " + adapterDir + (a == t ? " is" : " is inside") + " the --target_dir "
                             + target + ", which the fused model is published into as a whole; give the adapter a "
                             "folder of its own, or leave --peft_target_dir out to write it into "
                             + (t / "lora_adapter").string());
    }
    const Status usable = checkMergeTargets({ adapter }, adapterDir);
    if (!usable)
        return usable.error().withContext("--peft_target_dir");
    return Status::success();
}

/// The GGUF export of the model; LoRA checkpoints are merged first.
void planGguf(PreparedMerge& p)
{
    const auto start = std::chrono::steady_clock::now();
    if (p.model.lora)
        return refuse(p, makeError("a LoRA checkpoint: merge it into a Hugging Face folder first (--lora fused) and "
                                   "export that folder with --format gguf"));
    GgufOptions options = p.settings.ggufOptions;
    options.hfConfigDir = p.model.settings.mapping.configDir;
    options.forceTieWordEmbeddings = p.model.settings.check.tieWordEmbeddings;
    options.threads = resolveThreads(static_cast<int>(p.model.settings.threads));
    auto plan = planGgufMerge(*p.model.input, options);
    if (!plan)
        return refuse(p, plan.error());
    p.gguf = std::move(*plan);
    p.model.stageSeconds.emplace_back("plan", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

/// The safetensors merge: the model (or a LoRA checkpoint's fused model and adapter), and where the adapter goes.
void planSafetensors(PreparedMerge& p)
{
    MergeOptions options;
    options.dtype = p.model.settings.dtype;
    options.maxShardSize = p.settings.maxShardSize;
    planModel(p.model, options, p.model.settings.loraOutput);
    if (p.model.refusal || !p.request.peftTargetDir)
        return;
    if (!p.model.lora)
        return refuse(p, makeError("--peft_target_dir is for LoRA checkpoints, and " + p.model.settings.localDir
                                   + " holds no LoRA tensors"),
                      true);
    for (const auto& o : p.model.outputs())
        p.separateAdapter = p.separateAdapter || !o.subfolder.empty();
}

/// The names the merge publishes at the top of its target: files, sub-folders (a LoRA adapter), or the GGUF file.
std::vector<std::string> publishedNames(const PreparedMerge& p)
{
    if (p.gguf)
        return p.gguf->outputFileNames();
    std::vector<std::string> names;
    for (const auto& o : p.outputs()) {
        if (!o.subfolder.empty()) {
            names.push_back(o.subfolder);
            continue;
        }
        const auto files = o.plan->outputFileNames();
        names.insert(names.end(), files.begin(), files.end());
    }
    return names;
}

/// Sorts what an existing target holds into what the merge replaces and what it keeps (see PreparedMerge).
void listTargetEntries(PreparedMerge& p, const std::string& target)
{
    const auto names = publishedNames(p);
    for (auto& name : targetEntryNames(target))
        (std::find(names.begin(), names.end(), name) != names.end() ? p.replacedFiles : p.otherFiles)
            .push_back(std::move(name));
}

/// What the merge would refuse of its target(s), as a dry run checks it.
void checkTargets(PreparedMerge& p)
{
    const std::string target = p.request.target();
    if (target.empty()) {
        p.target = makeError("--target_dir: needs a folder name (it is empty)");
        return;
    }
    const auto outputs = p.outputs();
    if (p.separateAdapter)
        p.adapterTarget = checkAdapterTarget(p.request.peftTargetDir.value_or(""), target, *p.adapterOutput(),
                                             !outputs.empty());
    if (p.settings.part)
        return;
    listTargetEntries(p, target);
    if (p.gguf)
        p.target = checkGgufTarget(*p.gguf, target);
    else if (!outputs.empty())
        p.target = checkMergeTargets(outputs, target);
    else
        return; // only the adapter, into its own folder
    if (p.target)
        p.target = StagedRun::checkFree(target);
}

} // namespace

std::vector<MergeOutput> PreparedMerge::outputs() const
{
    auto all = model.outputs();
    if (separateAdapter)
        all.erase(std::remove_if(all.begin(), all.end(), [](const MergeOutput& o) { return !o.subfolder.empty(); }),
                  all.end());
    return all;
}

std::optional<MergeOutput> PreparedMerge::adapterOutput() const
{
    if (!separateAdapter)
        return std::nullopt;
    for (auto o : model.outputs())
        if (!o.subfolder.empty()) {
            o.subfolder.clear();
            return o;
        }
    return std::nullopt;
}

std::size_t PreparedMerge::tensorCount() const
{
    if (gguf)
        return gguf->merge.tensors.size() + gguf->quantized.size();
    std::size_t n = 0;
    for (const auto& o : model.outputs())
        n += o.plan->tensors.size();
    return n;
}

std::uint64_t PreparedMerge::byteCount() const
{
    std::uint64_t n = 0;
    if (gguf) {
        n = gguf->merge.totalBytes;
        for (const auto& q : gguf->quantized)
            n += q.bytes;
        return n;
    }
    for (const auto& o : model.outputs())
        n += o.plan->totalBytes;
    return n;
}

PreparedMerge prepareMerge(const MergeRequest& request, const PrepareContext& context, const EnvLookup& env)
{
    PreparedMerge p;
    p.request = request;
    auto settings = mergeSettings(request, env);
    if (!settings) {
        refuse(p, settings.error(), true);
        return p;
    }
    p.settings = std::move(settings->second);
    p.model = readModel(request, settings->first, {}, context);
    if (!p.model.refusal)
        request.gguf() ? planGguf(p) : planSafetensors(p);
    if (p.model.refusal)
        p.refusal = p.model.refusal;
    if (!p.refusal)
        checkTargets(p);
    return p;
}

Result<MergeOutcome> runPreparedMerge(const PreparedMerge& p, MergeRunOptions run)
{
    if (p.refusal)
        return p.refusal->error;
    TESSERA_TRY(p.adapterTarget);
    const std::string target = p.request.target();
    run.threads = p.model.settings.threads;
    if (p.gguf)
        return writeGgufFile(*p.gguf, target, run);
    run.verifyReplicas = p.request.verifyReplicas;
    const auto outputs = p.outputs();
    auto outcome = outputs.empty() ? Result<MergeOutcome>(MergeOutcome {}) : mergeCheckpoints(outputs, target, run);
    if (!outcome || !p.separateAdapter)
        return outcome;
    // The adapter goes into its own folder once the fused model is published.
    const std::string adapterDir = *p.request.peftTargetDir;
    MergeRunOptions adapterRun = run;
    adapterRun.beforePublish = nullptr; // the report goes with the fused model
    auto adapter = mergeCheckpoints({ *p.adapterOutput() }, adapterDir, adapterRun);
    if (!adapter && adapter.error().isCanceled() && !outputs.empty())
        return makeError("canceled while writing the adapter; the fused model is in " + target + ", the adapter folder "
                         + adapterDir + " was left as it was");
    if (!adapter)
        return adapter.error().withContext(outputs.empty() ? "the adapter"
                                                           : "the fused model is in " + target
                                                               + ", but the adapter could not be written");
    for (const auto& f : adapter->files)
        outcome->files.push_back((fs::path(adapter->outputDir) / f).string());
    outcome->bytesWritten += adapter->bytesWritten;
    outcome->seconds += adapter->seconds;
    if (outputs.empty())
        outcome->outputDir = adapter->outputDir;
    return outcome;
}

} // namespace tessera
