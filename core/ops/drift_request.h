// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `tessera drift` as data: a run root whose saved steps are compared step to step. Read from argv or from the
// workbench's Run page.

#include "compare/drift.h"
#include "ops/arg_parser.h"
#include "result.h"

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tessera {

struct DriftRequest {
    std::optional<std::string> run;          ///< the run root
    std::optional<std::string> steps;        ///< --steps 100,200,…
    std::optional<std::string> role;         ///< --role actor|critic (actor)
    bool json = false;
    bool quiet = false;
    std::optional<std::string> hfModelPath;  ///< config.json folder, for Megatron names
    std::optional<std::string> threads;
    std::optional<std::string> top;          ///< --top N: largest movers listed per step (10)

    static ArgParser parser();
    static DriftRequest fromParser(const ArgParser& parsed);
    /// The words after `tessera drift`, read as the command line reads them; the error is the usage error.
    static Result<DriftRequest> fromArgs(const std::vector<std::string>& args);
    /// The words after `tessera drift` that make this request: the run root, then each flag given.
    std::vector<std::string> toArgs() const;

    bool silent() const { return json || quiet; }
    auto fields() const { return std::tie(run, steps, role, json, quiet, hfModelPath, threads, top); }
    bool operator==(const DriftRequest& other) const { return fields() == other.fields(); }
    bool operator!=(const DriftRequest& other) const { return !(*this == other); }
};

/// What the flags ask drift to read; the error is a usage error naming the flag.
Result<DriftOptions> driftSettings(const DriftRequest& request);

/// --top: how many of the largest movers the text output lists per step (10 when not given).
Result<std::size_t> driftTopValue(const DriftRequest& request);

} // namespace tessera
