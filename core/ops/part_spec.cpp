// SPDX-License-Identifier: GPL-3.0-or-later
#include "ops/part_spec.h"

#include "io/number_text.h"

#include <cstdlib>
#include <vector>

namespace tessera {

namespace {

constexpr unsigned long long kMaxParts = 1'000'000;

/// A whole decimal number without sign or junk, as every numeric option is read; nullopt otherwise.
std::optional<unsigned long long> parseCount(const std::string& text)
{
    const auto n = parseWholeNumber(text);
    return n ? std::optional<unsigned long long>(*n) : std::nullopt;
}

Result<unsigned long long> envNumber(const EnvLookup& env, const std::string& name)
{
    const auto value = env(name);
    if (!value)
        return makeError(name + " is not set");
    const auto n = parseCount(*value);
    if (!n)
        return makeError(name + " is '" + *value + "', not a whole number");
    return *n;
}

Result<PartSpec> checked(unsigned long long part, unsigned long long parts, std::string source)
{
    if (parts == 0 || parts > kMaxParts)
        return makeError(source + ": the number of parts must be between 1 and " + std::to_string(kMaxParts)
                         + " (got " + std::to_string(parts) + ")");
    if (part >= parts)
        return makeError(source + ": part " + std::to_string(part) + " of " + std::to_string(parts)
                         + " does not exist (parts are numbered 0 to " + std::to_string(parts - 1) + ")");
    return PartSpec { static_cast<unsigned>(part), static_cast<unsigned>(parts), std::move(source) };
}

/// Rank and size from a pair of variables, when the first is set.
std::optional<Result<PartSpec>> fromPair(const EnvLookup& env, const std::string& rankVar, const std::string& sizeVar)
{
    if (!env(rankVar))
        return std::nullopt;
    auto rank = envNumber(env, rankVar);
    if (!rank)
        return Result<PartSpec>(rank.error());
    auto size = envNumber(env, sizeVar);
    if (!size)
        return Result<PartSpec>(size.error().withContext(rankVar + " is set, but"));
    return checked(*rank, *size, rankVar + "/" + sizeVar);
}

std::optional<Result<PartSpec>> fromSlurmArray(const EnvLookup& env)
{
    if (!env("SLURM_ARRAY_TASK_ID"))
        return std::nullopt;
    auto id = envNumber(env, "SLURM_ARRAY_TASK_ID");
    if (!id)
        return Result<PartSpec>(id.error());
    auto count = envNumber(env, "SLURM_ARRAY_TASK_COUNT");
    if (!count)
        return Result<PartSpec>(count.error().withContext("SLURM_ARRAY_TASK_ID is set, but"));
    // --array=1-8 or --array=0-30:2 number the tasks from their minimum in steps.
    unsigned long long min = 0, step = 1;
    if (env("SLURM_ARRAY_TASK_MIN")) {
        auto m = envNumber(env, "SLURM_ARRAY_TASK_MIN");
        if (!m)
            return Result<PartSpec>(m.error());
        min = *m;
    }
    if (env("SLURM_ARRAY_TASK_STEP")) {
        auto s = envNumber(env, "SLURM_ARRAY_TASK_STEP");
        if (!s || *s == 0)
            return Result<PartSpec>(makeError("SLURM_ARRAY_TASK_STEP must be a positive whole number"));
        step = *s;
    }
    if (*id < min || (*id - min) % step != 0)
        return Result<PartSpec>(makeError("SLURM_ARRAY_TASK_ID " + std::to_string(*id) + " is not one of the array's "
                                          "tasks (minimum " + std::to_string(min) + ", step " + std::to_string(step) + ")"));
    return checked((*id - min) / step, *count, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT");
}

} // namespace

EnvLookup processEnvironment()
{
    return [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        if (!value)
            return std::nullopt;
        return std::string(value);
    };
}

Result<PartSpec> resolvePart(const std::string& partText, const std::string& partsText, const EnvLookup& env)
{
    std::optional<unsigned long long> partsFlag;
    if (!partsText.empty()) {
        partsFlag = parseCount(partsText);
        if (!partsFlag || *partsFlag == 0)
            return makeError("--parts must be a positive whole number (got '" + partsText + "')");
    }
    if (partText != "auto") {
        const auto slash = partText.find('/');
        const auto k = slash == std::string::npos ? std::nullopt : parseCount(partText.substr(0, slash));
        const auto n = slash == std::string::npos ? std::nullopt : parseCount(partText.substr(slash + 1));
        if (!k || !n)
            return makeError("--part must be K/N (this process's part K, numbered from 0, of N) or auto (got '"
                             + partText + "')");
        if (partsFlag && *partsFlag != *n)
            return makeError("--part " + partText + " and --parts " + partsText + " disagree on the number of parts");
        return checked(*k, *n, "--part");
    }
    std::optional<Result<PartSpec>> found;
    if (!found)
        found = fromPair(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    if (!found)
        found = fromPair(env, "PMI_RANK", "PMI_SIZE");
    if (!found)
        found = fromSlurmArray(env);
    if (!found)
        found = fromPair(env, "SLURM_PROCID", "SLURM_NTASKS");
    if (!found && env("JOB_COMPLETION_INDEX")) {
        auto index = envNumber(env, "JOB_COMPLETION_INDEX");
        if (!index)
            return index.error();
        if (!partsFlag)
            return makeError("JOB_COMPLETION_INDEX (a Kubernetes indexed Job) gives this part but not how many there "
                             "are: add --parts N (the Job's completions)");
        found = checked(*index, *partsFlag, "JOB_COMPLETION_INDEX");
    }
    if (!found)
        return makeError("--part auto: no launcher found in the environment (looked for OMPI_COMM_WORLD_RANK, "
                         "PMI_RANK, SLURM_ARRAY_TASK_ID, SLURM_PROCID and JOB_COMPLETION_INDEX); give --part K/N");
    if (*found && partsFlag && found->value().parts != *partsFlag)
        return makeError(found->value().source + " says " + std::to_string(found->value().parts)
                         + " parts, but --parts says " + partsText);
    return *found;
}

} // namespace tessera
