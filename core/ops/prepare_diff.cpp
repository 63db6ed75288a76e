// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/prepare_diff.h"

#include "compare/config_compare.h"
#include "formats/scan.h"
#include "mapping/hf_parameter_check.h"
#include "mapping/lora.h"
#include "mapping/megatron_mapping.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace tessera {

namespace {

/// Scan progress of one side: its file names prefixed with the side ("A: …").
class SideProgress final : public Progress {
public:
    SideProgress(Progress& inner, std::string side) : m_inner(inner), m_side(std::move(side)) { }
    void report(std::uint64_t done, std::uint64_t total, const std::string& text) override
    {
        m_inner.report(done, total, m_side + ": " + text);
    }
    bool isCanceled() const override { return m_inner.isCanceled(); }

private:
    Progress& m_inner;
    std::string m_side;
};

std::string normalPath(const std::string& path)
{
    std::error_code ec;
    const fs::path absolute = fs::absolute(path, ec);
    return (ec ? fs::path(path) : absolute).lexically_normal().string();
}

/// `path` as read with `hfModelPath` and checked against its config.json: a scan of the context, or a new one.
Result<std::shared_ptr<const CheckpointInfo>> readSide(PreparedDiff& p, const PrepareContext& context,
                                                       const std::string& path, const std::string& hfModelPath,
                                                       const std::string& side)
{
    for (const auto& s : context.scans) {
        const bool sameConfig = hfModelPath.empty() ? s.hfModelPath.empty()
                                                    : normalPath(hfModelPath) == normalPath(s.info->hfConfigDir);
        if (s.info && s.parametersChecked && sameConfig && normalPath(s.path) == normalPath(path))
            return s.info;
    }
    SideProgress progress(context.progress ? *context.progress : silentProgress(), side);
    auto info = scanCheckpoint(path, ScanOptions { hfModelPath, static_cast<int>(p.options.threads) }, progress);
    if (!info)
        return info.error().withContext(side);
    // What config.json expects is checked as everywhere else, so a side's missing parameters are among its problems.
    (void)checkExpectedParameters(*info, {});
    auto shared = std::make_shared<const CheckpointInfo>(std::move(*info));
    p.scans.push_back({ shared, path, hfModelPath, true });
    return shared;
}

/// Problems of whole files are warnings; those of one tensor are also in its row, so a few are listed and the rest
/// counted (a truncated rank flags every tensor it held).
void listProblems(PreparedDiff& p, const CheckpointInfo& info, const std::string& side)
{
    constexpr std::size_t kTensorProblemsListed = 3;
    std::size_t tensorProblems = 0;
    for (const auto& problem : info.problems) {
        if (!problem.tensor.empty() && ++tensorProblems > kTensorProblemsListed)
            continue;
        p.warnings.push_back(side + ": " + problem.text());
    }
    if (tensorProblems > kTensorProblemsListed)
        p.warnings.push_back(side + ": … and " + std::to_string(tensorProblems - kTensorProblemsListed)
                             + " more tensors with problems (each in its row below)");
}

/// --base_model read as a Hugging Face model of its own, as a merge reads it.
Result<std::shared_ptr<const CheckpointInfo>> readBaseModel(PreparedDiff& p, const PrepareContext& context,
                                                            const std::string& path, const CheckpointInfo& a)
{
    auto info = readSide(p, context, path, "", "--base_model");
    TESSERA_TRY(info);
    auto base = baseModelAsRead(**info, path, a.hfConfigDir);
    TESSERA_TRY(base);
    return std::make_shared<const CheckpointInfo>(std::move(*base));
}

/// The LoRA flags are for LoRA checkpoints: given for another A, they are refused as a merge refuses them.
Status checkLoraFlags(const DiffRequest& request, const CheckpointInfo& a)
{
    const char* flag = request.baseModel ? "--base_model"
        : request.loraAlpha              ? "--lora_alpha"
        : request.useRslora              ? "--use_rslora"
        : request.lora                   ? "--lora"
                                         : nullptr;
    return loraFlagsApply(a, a.root, flag);
}

/// One side read, its problems listed and its names made Hugging Face's (A's LoRA read as `lora` asks).
Result<CheckpointInfo> preparedSide(PreparedDiff& p, const PrepareContext& context, const std::string& path,
                                    const std::string& hfModelPath, const std::string& side,
                                    const DiffRequest* loraFlags = nullptr)
{
    auto info = readSide(p, context, path, hfModelPath, side);
    TESSERA_TRY(info);
    listProblems(p, **info, side);
    LoraReading lora;
    std::shared_ptr<const CheckpointInfo> base;
    if (loraFlags) {
        TESSERA_TRY(checkLoraFlags(*loraFlags, **info));
        auto reading = diffLoraReading(*loraFlags);
        TESSERA_TRY(reading);
        lora = *reading;
        if (loraFlags->baseModel) {
            auto read = readBaseModel(p, context, *loraFlags->baseModel, **info);
            TESSERA_TRY(read);
            base = *read;
            lora.base = base.get();
        }
    }
    return withHfNames(**info, hfModelPath, &p.warnings, lora);
}

} // namespace

PreparedDiff prepareDiff(const DiffRequest& request, const PrepareContext& context)
{
    PreparedDiff p;
    p.request = request;
    auto options = diffSettings(request);
    if (!options) {
        p.refusal = Refusal { options.error(), true };
        return p;
    }
    p.options = *options;
    const std::string pathA = *request.a;
    auto a = preparedSide(p, context, pathA, request.hfModelPath.value_or(""), "A", &request);
    if (!a) {
        p.refusal = Refusal { a.error() };
        return p;
    }
    if (request.loraUpdate) {
        // The base model is the reference: each fused weight's difference is its update (B·A)·scale.
        if (a->loraDeltas.empty()) {
            p.refusal = Refusal { makeError(pathA + " has no LoRA update to show (not a LoRA checkpoint with its base "
                                                    "weights)") };
            return p;
        }
        p.b = std::make_shared<const CheckpointInfo>(a->withoutLoraUpdates());
    } else {
        auto b = preparedSide(p, context, *request.b, request.hfModelPathB.value_or(""), "B");
        if (!b) {
            p.refusal = Refusal { b.error() };
            return p;
        }
        p.b = std::make_shared<const CheckpointInfo>(std::move(*b));
    }
    p.a = std::make_shared<const CheckpointInfo>(std::move(*a));
    p.models = describeConfigDifferences(compareModelConfigs(p.a->hfConfigDir, p.b->hfConfigDir));
    return p;
}

Result<DiffReport> runPreparedDiff(const PreparedDiff& p, Progress& progress, const DiffRowSink& onRow)
{
    if (p.refusal)
        return p.refusal->error;
    return diffCheckpoints(*p.a, *p.b, p.options, progress, onRow);
}

} // namespace tessera
