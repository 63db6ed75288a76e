// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/megatron_grid.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace tessera {

std::string megatronRankFolderName(int tp, int pp, int ep, bool withPp, bool withEp)
{
    char buf[64];
    std::string name;
    std::snprintf(buf, sizeof buf, "mp_rank_%02d", tp);
    name = buf;
    if (withPp) {
        std::snprintf(buf, sizeof buf, "_%03d", pp);
        name += buf;
    }
    if (withEp) {
        std::snprintf(buf, sizeof buf, "_%03d", ep);
        name += buf;
    }
    return name;
}

Result<MegatronGridShape> resolveMegatronGrid(std::vector<MegatronRankFolder>& folders, MegatronConfig& config,
                                              std::vector<Problem>& problems, const std::string& root)
{
    std::set<std::size_t> parts;
    for (const auto& f : folders)
        parts.insert(f.numbers.size());
    if (parts.size() > 1)
        return makeError("the mp_rank_* folder names mix forms (" + folders.front().folderName + " and others with a "
                         "different number of parts); remove the folders that do not belong to this checkpoint");
    const std::size_t n = *parts.begin();
    MegatronGridShape grid;
    const auto& pp = config.pipelineParallel;
    const auto& ep = config.expertParallel;
    // Megatron appends _PPP only when PP > 1 and _EEE only when EP > 1 (get_checkpoint_name).
    if (n == 1) {
        grid.namesHavePp = grid.namesHaveEp = false;
    } else if (n == 3) {
        grid.namesHavePp = grid.namesHaveEp = true;
    } else if (pp) {
        grid.namesHavePp = *pp > 1;
        grid.namesHaveEp = !grid.namesHavePp;
    } else if (ep) {
        grid.namesHaveEp = *ep > 1;
        grid.namesHavePp = !grid.namesHaveEp;
    } else {
        return makeError("folder names like " + folders.front().folderName + " are ambiguous: the second number is "
                         "the pipeline stage when pipeline_model_parallel_size > 1, or the expert rank when "
                         "expert_model_parallel_size > 1, and nothing records which. Put a transformer_config.json "
                         "with pipeline_model_parallel_size and expert_model_parallel_size beside the mp_rank_* "
                         "folders (verl writes one in actor/)");
    }
    auto contradiction = [&](const MegatronSetting& s, const char* key, bool namesHave) {
        if (s && (*s > 1) != namesHave)
            problems.push_back({ root, "", s.describe(key) + (namesHave ? " but the folder names carry that rank ("
                                                                          : " but the folder names carry no such rank (")
                                               + folders.front().folderName + "); the folder names are followed" });
    };
    contradiction(pp, "pipeline_model_parallel_size", grid.namesHavePp);
    contradiction(ep, "expert_model_parallel_size", grid.namesHaveEp);

    int maxTp = 0, maxPp = 0, maxEp = 0;
    for (auto& f : folders) {
        f.tp = static_cast<int>(f.numbers[0]);
        f.pp = grid.namesHavePp ? static_cast<int>(f.numbers[1]) : 0;
        f.ep = grid.namesHaveEp ? static_cast<int>(f.numbers[grid.namesHavePp ? 2 : 1]) : 0;
        maxTp = std::max(maxTp, f.tp);
        maxPp = std::max(maxPp, f.pp);
        maxEp = std::max(maxEp, f.ep);
    }
    auto size = [&](MegatronSetting& s, bool inNames, int maxIndex) {
        if (s && (*s > 1) == inNames && *s >= 1)
            return static_cast<int>(*s);
        s.value = inNames ? maxIndex + 1 : 1;
        s.source = inNames ? std::string("the mp_rank_* folder names") : std::string("absent from the folder names");
        return static_cast<int>(*s);
    };
    grid.pp = size(config.pipelineParallel, grid.namesHavePp, maxPp);
    grid.ep = size(config.expertParallel, grid.namesHaveEp, maxEp);
    if (config.tensorParallel && *config.tensorParallel >= 1) {
        grid.tp = static_cast<int>(*config.tensorParallel);
    } else {
        config.tensorParallel.value = maxTp + 1;
        config.tensorParallel.source = "the mp_rank_* folder names";
        grid.tp = maxTp + 1;
    }
    return grid;
}

} // namespace tessera
