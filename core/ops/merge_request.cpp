// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/merge_request.h"

#include "io/byte_size.h"
#include "ops/vocabulary.h"

namespace tessera {

namespace {

using R = MergeRequest;

const std::vector<Flag<R>>& mergeFlags()
{
    static const std::vector<Flag<R>> flags = [] {
        auto all = modelFlags<R>();
        const std::vector<Flag<R>> own {
            option<R>("format", "FORMAT", "safetensors (a Hugging Face folder) or gguf (one file for llama.cpp, Ollama, "
                                          "LM Studio: TARGET/<name>-<outtype>.gguf)", &R::format, "safetensors"),
            option<R>("outtype", "TYPE", "with --format gguf: " + ggufOutTypeChoices() + " (norms and 1-D tensors "
                                         "stay f32, as llama.cpp's converter writes them; the q*_k* and q4/q5 types "
                                         "are llama.cpp's mixtures, the same bytes llama-quantize writes; each type "
                                         "is described under GGUF types below)", &R::outtype,
                      ggufOutTypeName(kDefaultGgufOutType)),
            option<R>("name", "NAME", "with --format gguf: general.name and the file name's stem", &R::name,
                      "config.json's _name_or_path or the checkpoint's folder"),
            option<R>("target_dir", "DIR", "output folder (created; existing files of other names are kept)",
                      &R::targetDir, "tmp"),
            option<R>("max_shard_size", "SIZE", "largest output file before sharding (500MB, 2GiB, …)",
                      &R::maxShardSize, "5GB"),
            option<R>("weights_from", "WHERE", "model (the checkpoint's weights) or optimizer (Megatron torch_dist: "
                                               "the fp32 master weights its distributed optimizer saved as "
                                               "optimizer.state.fp32_param.*, also when the model was not saved)",
                      &R::weightsFrom, "model"),
            toggle<R>("dry_run", "print the merge plan (tensors, copy steps, files, memory, disk) and write nothing",
                      &R::dryRun),
            toggle<R>("verify_replicas", "check that replicated pieces on other ranks are identical to the one written",
                      &R::verifyReplicas),
            toggle<R>("tensors", "with --dry-run: list every tensor and how it is copied", &R::tensors),
            option<R>("peft_target_dir", "DIR", "LoRA: write the PEFT adapter into DIR instead of TARGET/lora_adapter "
                                                "(published on its own, after the fused model)", &R::peftTargetDir),
            toggle<R>("save_intermediate", "also write merge_report.json into the target: every written tensor with "
                                           "its source pieces, mapping rule, transform and CRC-32", &R::saveIntermediate),
            option<R>("hf_upload_path", "REPO", "not supported: upload the folder with 'huggingface-cli upload'",
                      &R::hfUploadPath),
            toggle<R>("private", "accepted for compatibility with verl (upload is not supported)", &R::privateRepo),
        };
        all.insert(all.end(), own.begin(), own.end());
        const auto parts = partFlags<R>();
        all.insert(all.end(), parts.begin(), parts.end());
        return all;
    }();
    return flags;
}

/// The GGUF flags: --outtype, and the flags a GGUF export has no use for.
Status checkGgufFlags(const MergeRequest& r, MergeSettings& s)
{
    if (r.outtype) {
        s.ggufOptions.outType = ggufOutTypeFromName(*r.outtype);
        if (!s.ggufOptions.outType)
            return makeError("--outtype must be " + ggufOutTypeChoices() + " (got '" + *r.outtype + "')");
    }
    if (r.dtype)
        return makeError("--dtype is for safetensors output; with --format gguf use --outtype");
    const std::pair<const char*, bool> unused[] = { { "max_shard_size", bool(r.maxShardSize) },
                                                    { "peft_target_dir", bool(r.peftTargetDir) },
                                                    { "save_intermediate", r.saveIntermediate },
                                                    { "verify_replicas", r.verifyReplicas } };
    for (const auto& [flag, given] : unused)
        if (given)
            return makeError(std::string("--") + flag + " is not used with --format gguf");
    s.ggufOptions.name = r.name.value_or("");
    return Status::success();
}

Status checkSafetensorsFlags(const MergeRequest& r, MergeSettings& s)
{
    auto maxShard = parseByteSize(r.maxShardSize.value_or("5GB"));
    if (!maxShard || *maxShard == 0)
        return makeError("--max_shard_size: " + (maxShard ? std::string("must be more than 0") : maxShard.error().message));
    s.maxShardSize = *maxShard;
    return Status::success();
}

} // namespace

ArgParser MergeRequest::parser()
{
    ArgParser parser("merge", "--local_dir DIR --target_dir DIR [options]",
                     "Merge a distributed checkpoint (verl FSDP/FSDP2/HSDP, DTensor, ShardedTensor, DCP, or Megatron\n"
                     "legacy, Megatron-LM and torch_dist with their names mapped to Hugging Face's) into a\n"
                     "Hugging Face safetensors folder, bit for bit, streaming tensor by tensor. config.json,\n"
                     "generation_config.json, tokenizer files, chat templates and remote-code *.py are copied from\n"
                     "the config folder. The output appears atomically: on error or Ctrl-C nothing is left behind.\n"
                     "With --format gguf it writes one GGUF file for llama.cpp instead.");
    declareFlags(parser, mergeFlags());
    std::vector<std::pair<std::string, std::string>> types;
    for (const auto& type : ggufOutTypes())
        types.push_back({ type.name, type.summary });
    parser.addList("GGUF types", types);
    return parser;
}

MergeRequest MergeRequest::fromParser(const ArgParser& parsed)
{
    MergeRequest r;
    readFlags(parsed, mergeFlags(), r);
    r.strict = readStrict(parsed);
    return r;
}

Result<MergeRequest> MergeRequest::fromArgs(const std::vector<std::string>& args)
{
    return requestFromArgs<MergeRequest>(args, "a merge");
}

std::vector<std::string> MergeRequest::toArgs() const
{
    std::vector<std::string> args;
    writeFlags(*this, mergeFlags(), args);
    writeStrict(strict, args);
    return args;
}

Result<std::pair<ModelSettings, MergeSettings>> mergeSettings(const MergeRequest& r, const EnvLookup& env)
{
    MergeSettings s;
    auto part = partSettings(r, env);
    TESSERA_TRY(part);
    s.part = *part;
    if (s.part && r.peftTargetDir)
        return makeError("--part: --peft_target_dir is not supported for a split merge; the adapter is written into "
                         "TARGET/lora_adapter");
    if (s.part && r.saveIntermediate)
        return makeError("--part: --save_intermediate is not supported for a split merge");
    if (r.hfUploadPath)
        return makeError("--hf_upload_path is not supported; merge, then run 'huggingface-cli upload " + *r.hfUploadPath
                         + " " + r.target() + "'");
    const std::string format = r.format.value_or("safetensors");
    if (format != "safetensors" && format != "gguf")
        return makeError("--format must be safetensors or gguf (got '" + format + "')");
    if (!r.gguf() && (r.outtype || r.name))
        return makeError(std::string("--") + (r.outtype ? "outtype" : "name")
                         + " is for --format gguf (a safetensors merge takes --dtype)");
    auto model = modelSettings(r);
    TESSERA_TRY(model);
    auto weightsFrom = weightsSourceValue(r.weightsFrom);
    TESSERA_TRY(weightsFrom);
    model->weightsFrom = *weightsFrom;
    TESSERA_TRY(r.gguf() ? checkGgufFlags(r, s) : checkSafetensorsFlags(r, s));
    return std::make_pair(std::move(*model), std::move(s));
}

Status MergeRequest::validate(const EnvLookup& env) const
{
    if (status)
        return Status::success(); // --status TARGET asks where a run in parts is; the other flags do not apply
    auto settings = mergeSettings(*this, env);
    TESSERA_TRY(settings);
    if (target().empty())
        return makeError("--target_dir: needs a folder name (it is empty)");
    if (peftTargetDir && peftTargetDir->empty())
        return makeError("--peft_target_dir: needs a folder name (it is empty)");
    return Status::success();
}

bool MergeRequest::operator==(const MergeRequest& o) const
{
    auto own = [](const MergeRequest& r) {
        return std::tie(r.format, r.outtype, r.name, r.targetDir, r.maxShardSize, r.weightsFrom, r.dryRun,
                        r.verifyReplicas, r.tensors, r.peftTargetDir, r.saveIntermediate, r.hfUploadPath, r.privateRepo);
    };
    return ModelRequest::fields() == o.ModelRequest::fields() && PartRequest::fields() == o.PartRequest::fields()
        && own(*this) == own(o);
}

} // namespace tessera
