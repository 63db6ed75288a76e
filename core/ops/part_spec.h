// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// `--part K/N` and `--part auto`: which part of a split merge this process is, from the command line or from the
// environment the cluster's launcher gives each process it starts (Slurm, a Kubernetes indexed Job, mpirun).
// Nothing is linked: the launcher only starts the processes.

#include "result.h"

#include <functional>
#include <optional>
#include <string>

namespace tessera {

/// Part `part` (0-based) of `parts`, and where that came from ("--part", "SLURM_ARRAY_TASK_ID", …).
struct PartSpec {
    unsigned part = 0;
    unsigned parts = 1;
    std::string source;
};

/// Reads one environment variable; nullopt when unset. Tests pass their own.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
/// The process environment.
EnvLookup processEnvironment();

/// `partText` is --part's value ("K/N" or "auto"), `partsText` --parts' ("" when not given). With "auto", the
/// first launcher found in this order names the part: Open MPI (OMPI_COMM_WORLD_RANK/SIZE), MPICH and Intel MPI
/// (PMI_RANK/PMI_SIZE), a Slurm job array (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_STEP,
/// SLURM_ARRAY_TASK_COUNT), Slurm tasks (SLURM_PROCID/SLURM_NTASKS), a Kubernetes indexed Job
/// (JOB_COMPLETION_INDEX, with N from --parts). A --parts that disagrees with the launcher is an error.
Result<PartSpec> resolvePart(const std::string& partText, const std::string& partsText, const EnvLookup& env);

} // namespace tessera
