// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/diff_request.h"

#include "ops/flag_table.h"
#include "ops/model_request.h"
#include "ops/option_values.h"
#include "ops/vocabulary.h"

namespace tessera {

namespace {

using R = DiffRequest;

const std::vector<Flag<R>>& diffFlags()
{
    static const std::vector<Flag<R>> flags {
        toggle<R>("lora_update", "A is a LoRA checkpoint: compare its base weights (as B) with its fused model (as A), "
                                 "so every fused weight shows its update", &R::loraUpdate),
        option<R>("atol", "A", "absolute tolerance", &R::atol, "0"),
        option<R>("rtol", "R", "relative tolerance, to B: |a-b| <= atol + rtol*|b|", &R::rtol, "0"),
        toggle<R>("json", "print one JSON object on stdout (non-finite numbers as \"inf\", \"-inf\", \"nan\")", &R::json),
        toggle<R>("failures_only", "list only the tensors that do not pass", &R::failuresOnly),
        toggle<R>("quiet", "no progress bar", &R::quiet),
        option<R>("hf_model_path", "DIR", "config.json folder for A (Megatron name mapping), if not found",
                  &R::hfModelPath),
        option<R>("hf_model_path_b", "DIR", "config.json folder for B, if not found", &R::hfModelPathB),
        option<R>("threads", "N", "tensors compared in parallel, 1 to " + std::to_string(kMaxThreads), &R::threads,
                  "number of cores"),
        // The LoRA flags of merge and test, read the same way, so a diff can show what a test compared.
        option<R>("lora", "WHAT", "LoRA checkpoint A: compare its fused model (fused), its PEFT adapter (adapter), "
                                  "or the fused model when it has base weights (both)", &R::lora, "both"),
        option<R>("lora_alpha", "A", "LoRA alpha, when the checkpoint does not record it (lora_train_meta.json)",
                  &R::loraAlpha),
        toggle<R>("use_rslora", "LoRA: scale by alpha/sqrt(r) (rank-stabilised LoRA) instead of alpha/r",
                  &R::useRslora),
        option<R>("base_model", "DIR", "LoRA: the base model (a Hugging Face folder, or an FSDP or DCP checkpoint) "
                                       "for an adapter-only A", &R::baseModel),
        // The test's dtype handling, so a diff can give a test's answer (Open in Diff).
        option<R>("dtype", "TYPE", "bf16, fp16 or fp32: A's floating-point tensors converted as a merge with --dtype "
                                   "converts them", &R::dtype, "keep A's"),
        toggle<R>("round_to_narrower", "floating tensors of different widths are compared at the narrower dtype, "
                                       "the wider side rounded to it, as tessera test compares (otherwise they are "
                                       "a dtype mismatch)", &R::roundToNarrower),
    };
    return flags;
}

} // namespace

ArgParser DiffRequest::parser()
{
    ArgParser parser("diff", "A B [--atol A --rtol R] [--json] [--failures_only]  |  A --lora_update",
                     "Compare two checkpoints tensor by tensor. A and B may be any layout Tessera reads (verl FSDP,\n"
                     "DCP, Megatron, Hugging Face safetensors folders or files); Megatron names are mapped to Hugging\n"
                     "Face names first. Prints one line per tensor: status, max/mean |a-b|, max relative error,\n"
                     "cosine similarity, differing elements, NaN/Inf counts of A and B and whether the bytes are\n"
                     "equal. A tensor passes when |a-b| <= atol + rtol*|b| for every element (NaN only matches NaN;\n"
                     "integer tensors must be equal). Exits with 0 when every tensor passes and none is missing,\n"
                     "1 otherwise. A LoRA checkpoint is compared as its fused model; with --lora_update and no B,\n"
                     "its base model is compared with its fused model, showing what the adapter changed.");
    parser.addPositional("A", "the checkpoint to check (folder or file)");
    parser.addPositional("B", "the reference (folder or file); not with --lora_update", true);
    declareFlags(parser, diffFlags());
    return parser;
}

DiffRequest DiffRequest::fromParser(const ArgParser& parsed)
{
    DiffRequest r;
    readFlags(parsed, diffFlags(), r);
    r.a = parsed.positional("A");
    if (const std::string b = parsed.positional("B"); !b.empty())
        r.b = b;
    return r;
}

Result<DiffRequest> DiffRequest::fromArgs(const std::vector<std::string>& args)
{
    return requestFromArgs<DiffRequest>(args, "a diff");
}

std::vector<std::string> DiffRequest::toArgs() const
{
    std::vector<std::string> args;
    args.push_back(a.value_or(""));
    if (b)
        args.push_back(*b);
    writeFlags(*this, diffFlags(), args);
    return args;
}

Result<DiffOptions> diffSettings(const DiffRequest& r)
{
    DiffOptions options;
    auto atol = toleranceValue("atol", r.atol);
    TESSERA_TRY(atol);
    auto rtol = toleranceValue("rtol", r.rtol);
    TESSERA_TRY(rtol);
    auto threads = threadsValue(r.threads);
    TESSERA_TRY(threads);
    TESSERA_TRY(diffLoraReading(r));
    auto dtype = outputDtypeValue(r.dtype);
    TESSERA_TRY(dtype);
    options.dtypeA = *dtype;
    options.atNarrowerDtype = r.roundToNarrower;
    options.atol = *atol;
    options.rtol = *rtol;
    options.threads = *threads;
    if (r.a.value_or("").empty())
        return makeError("missing A");
    if (r.loraUpdate == r.b.has_value())
        return makeError(r.loraUpdate ? "--lora_update compares A with itself; give no B"
                                      : "B is required (or --lora_update for a LoRA checkpoint)");
    return options;
}

Result<LoraReading> diffLoraReading(const DiffRequest& r)
{
    auto values = loraFlagValues(r.lora, r.loraAlpha, r.useRslora);
    TESSERA_TRY(values);
    LoraReading reading;
    reading.output = values->output;
    reading.settings = values->settings;
    return reading;
}

DiffRequest diffRequestOfTest(const TestRequest& test)
{
    DiffRequest d;
    d.a = test.localDir;
    d.b = test.testHfDir;
    d.hfModelPath = test.hfModelPath;
    d.atol = test.atol;
    d.rtol = test.rtol;
    d.threads = test.threads;
    d.lora = test.lora;
    d.loraAlpha = test.loraAlpha;
    d.useRslora = test.useRslora;
    d.baseModel = test.baseModel;
    d.dtype = test.dtype;
    d.roundToNarrower = true; // the test compares floating tensors of different widths at the narrower
    // verl's --use_peft asks for the adapter as well: the test still compares the fused model.
    return d;
}

Status DiffRequest::validate() const
{
    TESSERA_TRY(diffSettings(*this));
    return Status::success();
}

} // namespace tessera
