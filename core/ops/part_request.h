// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The flags of a merge or split run in parts across processes (`--part K/N | auto [--parts N]`), and of the
// question where such a run is (`--status TARGET [--discard]`).

#include "ops/flag_table.h"
#include "ops/part_spec.h"
#include "result.h"

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tessera {

struct PartRequest {
    std::optional<std::string> part;   ///< --part K/N or auto
    std::optional<std::string> parts;  ///< --parts N
    std::optional<std::string> status; ///< --status TARGET
    bool discard = false;              ///< --discard

    auto fields() const { return std::tie(part, parts, status, discard); }
    /// This process writes one part of the output.
    bool isPartRun() const { return part || parts; }
};

/// The part flags, in --help order.
template <typename Request>
std::vector<Flag<Request>> partFlags()
{
    using P = PartRequest;
    return {
        option<Request>("part", "K/N", "write only part K (numbered from 0) of N of the output (whole files, or byte "
                                       "ranges of one file such as the GGUF export), into a folder shared with the "
                                       "other parts (on one machine or many); the last part to finish publishes it. "
                                       "'auto' takes K and N from Slurm, mpirun or a Kubernetes indexed Job", &P::part),
        option<Request>("parts", "N", "with --part auto: the number of parts (needed for a Kubernetes indexed Job)",
                        &P::parts),
        option<Request>("status", "TARGET", "say which parts of a --part run into TARGET are done and which are missing",
                        &P::status),
        toggle<Request>("discard", "with --status: discard the unfinished parts of jobs into TARGET (their shared "
                                   "folder and the target's lock), so that another run may write it", &P::discard),
    };
}

/// Checks the part flags of a run that is not --status: --discard only with --status, --parts only with --part, and
/// the part this process is (from --part, or from the launcher's environment for auto). nullopt when it is not a
/// part run.
Result<std::optional<PartSpec>> partSettings(const PartRequest& request, const EnvLookup& env);

} // namespace tessera
