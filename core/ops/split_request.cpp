// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/split_request.h"

#include "command_name.h"
#include "ops/option_values.h"

#include <tuple>

namespace tessera {

namespace {

using R = SplitRequest;

/// The largest world size, parallel size or layer count the options take (the planner checks what fits the model).
constexpr std::uint64_t kMaxSplitSize = 1'000'000;

const std::vector<Flag<R>>& splitFlags()
{
    static const std::vector<Flag<R>> flags = [] {
        auto all = modelFlags<R>();
        const std::vector<Flag<R>> own {
            option<R>("hf_dir", "DIR", "the Hugging Face model to split (a folder of *.safetensors and config.json)",
                      &R::hfDir),
            option<R>("target_dir", "DIR", "output folder (created; must not hold a checkpoint already)", &R::targetDir),
            option<R>("format", "F", "fsdp, dcp, megatron or megatron-dist", &R::format, "fsdp"),
            option<R>("world_size", "N", "number of ranks", &R::worldSize),
            option<R>("mesh", "SHAPE", "fsdp: the device mesh, e.g. 2x4 for HSDP (Replicate() over the first dims, "
                                       "Shard(0) over the last)", &R::mesh, "N"),
            option<R>("mesh_dim_names", "A,B", "fsdp: mesh dim names", &R::meshDimNames,
                      "fsdp, or ddp,fsdp for a 2-D mesh"),
            option<R>("tp", "T", "megatron: tensor-parallel size", &R::tp, "1"),
            option<R>("pp", "P", "megatron: pipeline-parallel size", &R::pp, "1"),
            option<R>("vpp", "V", "megatron: virtual pipeline stages per pipeline stage (interleaved)", &R::vpp, "1"),
            option<R>("ep", "E", "megatron: expert-parallel size (mixture-of-experts models)", &R::ep, "1"),
            option<R>("num_layers_in_first_pipeline_stage", "N",
                      "megatron: uneven stages, N layers on the first pipeline stage (the others split the rest)",
                      &R::firstStageLayers),
            option<R>("num_layers_in_last_pipeline_stage", "N",
                      "megatron: uneven stages, N layers on the last pipeline stage", &R::lastStageLayers),
            option<R>("make_vocab_size_divisible_by", "N", "megatron: the vocabulary is padded to a multiple of N × TP",
                      &R::vocabDivisibleBy, "128"),
            option<R>("flavor", "F", "megatron: verl (model/mp_rank_*/model.pt lists) or megatron-lm "
                                     "(ITER/mp_rank_*/model_optim_rng.pt with args, and "
                                     "latest_checkpointed_iteration.txt)", &R::flavor, "verl"),
            option<R>("iteration", "N", "megatron-lm: write iter_NNNNNNN (default: release)", &R::iteration),
            toggle<R>("model_only", "write the model files only, leaving a run's optimizer, scheduler, random and "
                                    "dataloader state behind (verl then resumes with "
                                    "checkpoint.load_contents=[model])", &R::modelOnly),
            toggle<R>("dry_run", "print the split plan (files, tensors, boxes, memory, disk) and write nothing",
                      &R::dryRun),
            toggle<R>("tensors", "with --dry-run: list the tensors of the first file and the box each holds",
                      &R::tensors),
        };
        all.insert(all.end(), own.begin(), own.end());
        const auto parts = partFlags<R>();
        all.insert(all.end(), parts.begin(), parts.end());
        return all;
    }();
    return flags;
}

/// A size flag as a whole number from `min` to kMaxSplitSize (`fallback` when not given).
Result<std::uint64_t> sizeFlag(const char* flag, const std::optional<std::string>& text, std::uint64_t min,
                               const char* fallback = "0")
{
    return wholeNumberValue(flag, text.value_or(fallback), min, kMaxSplitSize);
}

/// The layout's sizes: ranks and mesh for FSDP and DCP, parallel sizes and stages for Megatron.
Status readSizes(const SplitRequest& r, SplitOptions& o)
{
    if (r.worldSize) {
        auto n = sizeFlag("world_size", r.worldSize, 1);
        TESSERA_TRY(n);
        o.worldSize = static_cast<int>(*n);
    }
    if (r.mesh) {
        auto mesh = parseMeshShape(*r.mesh);
        TESSERA_TRY(mesh);
        o.mesh = *mesh;
    }
    if (r.meshDimNames)
        o.meshDimNames = parseMeshDimNames(*r.meshDimNames);
    const std::tuple<const char*, const std::optional<std::string>*, int*, const char*> parallel[] = {
        { "tp", &r.tp, &o.tp, "1" },
        { "pp", &r.pp, &o.pp, "1" },
        { "vpp", &r.vpp, &o.vpp, "1" },
        { "ep", &r.ep, &o.ep, "1" },
        { "make_vocab_size_divisible_by", &r.vocabDivisibleBy, &o.vocabDivisibleBy, "128" },
    };
    for (const auto& [flag, text, field, fallback] : parallel) {
        auto n = sizeFlag(flag, *text, 1, fallback);
        TESSERA_TRY(n);
        *field = static_cast<int>(*n);
    }
    for (auto [flag, text, field] : { std::tuple { "num_layers_in_first_pipeline_stage", &r.firstStageLayers,
                                                   &o.firstStageLayers },
                                      { "num_layers_in_last_pipeline_stage", &r.lastStageLayers, &o.lastStageLayers } })
        if (*text) {
            auto n = sizeFlag(flag, *text, 0);
            TESSERA_TRY(n);
            *field = static_cast<std::int64_t>(*n);
        }
    return Status::success();
}

/// Which sizes go with which layout, and the Megatron flavour.
Status checkLayoutFlags(const SplitRequest& r, SplitOptions& o)
{
    const bool megatron = o.format == SplitFormat::Megatron || o.format == SplitFormat::MegatronDist;
    if (megatron && (r.worldSize || r.mesh))
        return makeError("--format " + std::string(splitFormatName(o.format))
                         + " takes --tp, --pp, --vpp and --ep, not --world_size or --mesh");
    if (!megatron && (r.tp || r.pp || r.vpp || r.ep || o.firstStageLayers || o.lastStageLayers))
        return makeError("--tp, --pp, --vpp, --ep and the pipeline stage sizes are for --format megatron and "
                         "megatron-dist");
    if (!megatron && !r.worldSize && !r.mesh)
        return makeError("give the number of ranks: --world_size N (or --mesh for --format fsdp)");
    const std::string flavor = r.flavor.value_or("verl");
    if (flavor != "verl" && flavor != "megatron-lm")
        return makeError("--flavor must be verl or megatron-lm (got '" + flavor + "')");
    o.megatronLm = flavor == "megatron-lm";
    if ((o.megatronLm || r.iteration) && o.format != SplitFormat::Megatron)
        return makeError("--flavor and --iteration are for --format megatron");
    if (r.iteration) {
        auto n = wholeNumberValue("iteration", *r.iteration, 0, 9'999'999);
        TESSERA_TRY(n);
        o.iteration = static_cast<std::int64_t>(*n);
    }
    return Status::success();
}

} // namespace

ArgParser SplitRequest::parser()
{
    ArgParser parser("split", "(--hf_dir DIR | --local_dir DIR) --target_dir DIR --format F [sizes] [options]",
                     "Write a Hugging Face model (--hf_dir: safetensors, single or sharded, any dtype) or reshard any\n"
                     "checkpoint Tessera reads (--local_dir: FSDP, DCP, Megatron in any layout, mapped to Hugging\n"
                     "Face names) as a distributed checkpoint, streaming tensor by tensor: no intermediate folder,\n"
                     "memory within about twice the largest tensor. Formats:\n"
                     "  fsdp  verl's FSDP2 actor folder: model_world_size_N_rank_R.pt holding DTensors as FSDP2's\n"
                     "        state_dict() and torch.save write them, fsdp_config.json and huggingface/ (config and\n"
                     "        tokenizer); a target named RUN/global_step_N/actor also updates\n"
                     "        RUN/latest_checkpointed_iteration.txt\n"
                     "  dcp   a PyTorch Distributed Checkpoint (.metadata + __R_0.distcp) with the model's keys,\n"
                     "        every tensor Shard(0) over the ranks, as torchtitan saves it\n"
                     "  megatron  verl's Megatron actor folder: model/mp_rank_XX[_YYY][_ZZZ]/model.pt (one state dict\n"
                     "        per virtual stage) with Megatron-core names, QKV fused per query group, [gate; up] fused,\n"
                     "        the vocabulary padded, layers numbered per stage, experts per EP rank;\n"
                     "        transformer_config.json and hf_config_and_tokenizer/\n"
                     "  megatron-dist  Megatron-core torch_dist in dist_ckpt/ (a DCP folder of tensors stacked on a\n"
                     "        layer axis, metadata.json, common.pt), transformer_config.json and huggingface/\n"
                     "A verl FSDP actor folder's training state goes with it to --format fsdp, so the run resumes at\n"
                     "the new world size: optim_world_size_N_rank_R.pt resharded like the parameters,\n"
                     "extra_state_world_size_N_rank_R.pt (scheduler, and rank r's random state from old rank r mod W)\n"
                     "and, into RUN/global_step_N/actor, ../data.pt. A torchtitan DCP folder's optimizer, scheduler\n"
                     "and train state go with it to --format dcp (its dataloader's to the same number of ranks).\n"
                     "Other targets refuse a training state unless --model_only.\n"
                     "The output appears atomically and never replaces files: on error or Ctrl-C nothing is left.\n"
                     "`" + commandName()
                         + " merge` turns the result back into the same Hugging Face model, bit for bit.");
    declareFlags(parser, splitFlags());
    return parser;
}

SplitRequest SplitRequest::fromParser(const ArgParser& parsed)
{
    SplitRequest r;
    readFlags(parsed, splitFlags(), r);
    r.strict = readStrict(parsed);
    return r;
}

Result<SplitRequest> SplitRequest::fromArgs(const std::vector<std::string>& args)
{
    return requestFromArgs<SplitRequest>(args, "a split");
}

std::vector<std::string> SplitRequest::toArgs() const
{
    std::vector<std::string> args;
    writeFlags(*this, splitFlags(), args);
    writeStrict(strict, args);
    return args;
}

Result<std::pair<ModelSettings, SplitSettings>> splitSettings(const SplitRequest& r, const EnvLookup& env)
{
    SplitSettings s;
    auto part = partSettings(r, env);
    TESSERA_TRY(part);
    s.part = *part;
    if (r.hfDir.has_value() == r.localDir.has_value())
        return makeError("give either --hf_dir (a Hugging Face model) or --local_dir (a checkpoint)");
    auto format = splitFormatFromName(r.format.value_or("fsdp"));
    TESSERA_TRY(format);
    s.options.format = *format;
    TESSERA_TRY(readSizes(r, s.options));
    TESSERA_TRY(checkLayoutFlags(r, s.options));
    s.options.userRulesFile = r.paramMapping.value_or("");
    ModelRequest model = r;
    model.localDir = r.source(); // --hf_dir is read as --local_dir is, then checked to be a Hugging Face model
    auto settings = modelSettings(model);
    TESSERA_TRY(settings);
    return std::make_pair(std::move(*settings), std::move(s));
}

Status SplitRequest::validate(const EnvLookup& env) const
{
    if (status)
        return Status::success(); // --status TARGET asks where a split in parts is; the other flags do not apply
    TESSERA_TRY(splitSettings(*this, env));
    if (targetDir.value_or("").empty())
        return makeError("--target_dir is required");
    return Status::success();
}

bool SplitRequest::operator==(const SplitRequest& o) const
{
    auto own = [](const SplitRequest& r) {
        return std::tie(r.hfDir, r.targetDir, r.format, r.worldSize, r.mesh, r.meshDimNames, r.tp, r.pp, r.vpp, r.ep,
                        r.firstStageLayers, r.lastStageLayers, r.vocabDivisibleBy, r.flavor, r.iteration, r.dryRun,
                        r.tensors, r.modelOnly);
    };
    return ModelRequest::fields() == o.ModelRequest::fields() && PartRequest::fields() == o.PartRequest::fields()
        && own(*this) == own(o);
}

} // namespace tessera
