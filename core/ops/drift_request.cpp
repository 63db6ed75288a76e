// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/drift_request.h"

#include "text_util.h"
#include "ops/flag_table.h"
#include "ops/option_values.h"

namespace tessera {

namespace {

using R = DriftRequest;

const std::vector<Flag<R>>& driftFlags()
{
    static const std::vector<Flag<R>> flags {
        option<R>("steps", "N,M,…", "read only these saved steps; each is compared with the previous one listed",
                  &R::steps, "every saved step"),
        option<R>("role", "ROLE", "verl's role folder in each global_step_N: actor or critic", &R::role, "actor"),
        toggle<R>("json", "print one JSON object on stdout: steps, records (name, step, relative_change, "
                          "max_abs_change, norm, nan, inf) and damaged steps", &R::json),
        option<R>("top", "N", "largest movers listed per step in the text output", &R::top, "10"),
        toggle<R>("quiet", "no progress bar", &R::quiet),
        option<R>("hf_model_path", "DIR", "config.json folder (Megatron name mapping), if not found beside the steps",
                  &R::hfModelPath),
        option<R>("threads", "N", "threads comparing the blocks of one tensor, 1 to " + std::to_string(kMaxThreads),
                  &R::threads, "number of cores"),
    };
    return flags;
}

} // namespace

ArgParser DriftRequest::parser()
{
    ArgParser parser("drift", "RUN_ROOT [--steps N,M,…] [--role critic] [--json]",
                     "How every tensor of a training run moved between its saved steps, and where NaN or Inf\n"
                     "appeared. RUN_ROOT holds the run's steps: verl's global_step_N (its actor/, or --role critic),\n"
                     "Megatron's iter_N, torchtitan's step-N, in any layout Tessera reads (each step with its own\n"
                     "world size and layout; Megatron names are mapped to Hugging Face names). Nothing is merged:\n"
                     "each step's files are read once, a tensor at a time. For every tensor and step: the relative\n"
                     "change ||W_s - W_prev|| / ||W_prev|| from the previous step (float64), the largest absolute\n"
                     "change, the norm, and exact NaN and Inf counts. The change is null at the first step, where\n"
                     "either step holds NaN/Inf, and where the previous norm is 0. Lists every tensor with NaN/Inf\n"
                     "first, then the largest movers of each step. Exits with 1 when any NaN/Inf is found or a step\n"
                     "is damaged, 0 otherwise.");
    parser.addPositional("RUN_ROOT", "the run folder holding the saved steps (or one step's folder)");
    declareFlags(parser, driftFlags());
    return parser;
}

DriftRequest DriftRequest::fromParser(const ArgParser& parsed)
{
    DriftRequest r;
    readFlags(parsed, driftFlags(), r);
    r.run = parsed.positional("RUN_ROOT");
    return r;
}

Result<DriftRequest> DriftRequest::fromArgs(const std::vector<std::string>& args)
{
    return requestFromArgs<DriftRequest>(args, "a drift report");
}

std::vector<std::string> DriftRequest::toArgs() const
{
    std::vector<std::string> args { run.value_or("") };
    writeFlags(*this, driftFlags(), args);
    return args;
}

Result<DriftOptions> driftSettings(const DriftRequest& r)
{
    DriftOptions options;
    if (r.run.value_or("").empty())
        return makeError("missing RUN_ROOT");
    options.root = *r.run;
    options.role = r.role.value_or("actor");
    if (options.role != "actor" && options.role != "critic")
        return makeError("--role is actor or critic, not '" + options.role + "'");
    if (r.steps) {
        for (const std::string& part : splitText(*r.steps, ',')) {
            auto step = wholeNumberValue("steps", part, 0, 999'999'999'999'999'999ULL);
            TESSERA_TRY(step);
            options.steps.push_back(static_cast<long long>(*step));
        }
        if (options.steps.empty())
            return makeError("--steps lists no step");
    }
    auto threads = threadsValue(r.threads);
    TESSERA_TRY(threads);
    options.threads = static_cast<int>(*threads);
    options.hfModelPath = r.hfModelPath.value_or("");
    TESSERA_TRY(driftTopValue(r));
    return options;
}

Result<std::size_t> driftTopValue(const DriftRequest& r)
{
    if (!r.top)
        return std::size_t { 10 };
    auto top = wholeNumberValue("top", *r.top, 0, 1'000'000);
    TESSERA_TRY(top);
    return static_cast<std::size_t>(*top);
}

} // namespace tessera
