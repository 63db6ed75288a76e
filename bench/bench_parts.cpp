// SPDX-License-Identifier: GPL-3.0-or-later
// Split-merge benchmark (not a test): `tessera merge --part K/N` with N = 1, 2, 4 (or --parts) processes on this
// machine. Writes a synthetic verl FSDP2 checkpoint (or takes --dir), then for each N starts N processes at once,
// each doing what `tessera merge --part K/N` does (scan, plan, write its share, record it; the last one publishes),
// and prints the wall time from the first start to the last exit, the combined throughput, each part's share and
// peak RSS, beside a plain copy of the same bytes and a single-process merge measured in the same run.
//
//   bench_parts [--dir CHECKPOINT] [--work DIR] [--gb 1.2] [--ranks 4] [--parts 1,2,4] [--threads T]
//               [--max_shard_size 5GB] [--rounds 2] [--keep] [--gguf OUTTYPE]
//
// --threads is each part's worker threads (default: the cores divided among the parts, at least 1). --gguf
// measures `tessera merge --format gguf --part K/N` instead: parts writing byte ranges of one GGUF file (the
// synthetic checkpoint gets a Llama config and tokenizer for it), beside the single-process export.

#include "bench_args.h"
#include "bench_timing.h"
#include "formats/scan.h"
#include "io/byte_size.h"
#include "merge/gguf_parts.h"
#include "merge/merge_engine.h"
#include "merge/merge_parts.h"
#include "merge/merge_plan.h"
#include "parallel.h"
#include "synthetic_checkpoint.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace tessera;
using namespace tessera::bench;
namespace fs = std::filesystem;

namespace {

/// --gguf's type; nullopt: a safetensors merge.
std::optional<GgufOutType> g_gguf;

/// One part of the GGUF export, as the command line runs it.
int runGgufPart(const CheckpointInfo& info, const std::string& target, unsigned part, unsigned parts, unsigned threads)
{
    GgufOptions options;
    options.outType = g_gguf;
    options.threads = threads;
    auto plan = planGgufMerge(info, options);
    auto assignment = plan ? planGgufParts(*plan, parts) : Result<GgufParts>(plan.error());
    MergeRunOptions run;
    run.threads = threads;
    auto outcome = assignment ? runGgufPart(*assignment, part, target, run) : Result<PartOutcome>(assignment.error());
    if (!outcome) {
        std::fprintf(stderr, "part %u: %s\n", part, outcome.error().message.c_str());
        return 1;
    }
    return 0;
}

/// One part, as the command line runs it. Exit code 0 on success.
int runPart(const std::string& dir, const std::string& target, unsigned part, unsigned parts, unsigned threads,
            std::uint64_t maxShard)
{
    auto info = scanCheckpoint(dir);
    if (!info) {
        std::fprintf(stderr, "part %u: %s\n", part, info.error().message.c_str());
        return 1;
    }
    if (g_gguf)
        return runGgufPart(*info, target, part, parts, threads);
    MergeOptions options;
    options.maxShardSize = maxShard;
    options.threads = threads;
    auto plan = planMerge(*info, options);
    if (!plan) {
        std::fprintf(stderr, "part %u: %s\n", part, plan.error().message.c_str());
        return 1;
    }
    const std::vector<MergeOutput> outputs { { &*info, &*plan, "" } };
    auto assignment = planParts(outputs, parts);
    if (!assignment)
        return 1;
    MergeRunOptions run;
    run.threads = threads;
    auto outcome = runMergePart(outputs, *assignment, part, target, run);
    if (!outcome) {
        std::fprintf(stderr, "part %u: %s\n", part, outcome.error().message.c_str());
        return 1;
    }
    return 0;
}

struct PartRun {
    double seconds = 0;
    long peakKb = 0;
    bool ok = false;
};

/// Starts all parts at once; returns each one's result and the wall time until the last exits.
std::vector<PartRun> runAllParts(const std::string& dir, const std::string& target, unsigned parts, unsigned threads,
                                 std::uint64_t maxShard, double& wall)
{
    const double start = now();
    std::vector<pid_t> children;
    for (unsigned k = 0; k < parts; ++k) {
        const pid_t child = ::fork();
        if (child == 0)
            ::_exit(runPart(dir, target, k, parts, threads, maxShard));
        children.push_back(child);
    }
    std::vector<PartRun> runs(parts);
    for (std::size_t done = 0; done < children.size(); ++done) {
        int status = 0;
        struct rusage usage {};
        const pid_t child = ::wait4(-1, &status, 0, &usage);
        const auto it = std::find(children.begin(), children.end(), child);
        if (it == children.end())
            continue;
        PartRun& r = runs[static_cast<std::size_t>(it - children.begin())];
        r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        r.seconds = now() - start;
        r.peakKb = usage.ru_maxrss;
    }
    wall = now() - start;
    return runs;
}

std::vector<unsigned> parseList(const std::string& text)
{
    std::vector<unsigned> list;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ','))
        if (!item.empty())
            list.push_back(static_cast<unsigned>(std::stoul(item)));
    return list;
}

} // namespace

int main(int argc, char** argv)
{
    std::string dir, work = (fs::temp_directory_path() / "tessera-bench-parts").string(), partsText = "1,2,4";
    std::string shardText = "5GB", ggufText;
    double gb = 1.2;
    int ranks = 4, threadsFlag = 0, rounds = 2;
    bool keep = false;
    if (!parseFlags(argc, argv, { { "--dir", &dir }, { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks },
                                  { "--parts", &partsText }, { "--threads", &threadsFlag }, { "--rounds", &rounds },
                                  { "--max_shard_size", &shardText }, { "--keep", &keep }, { "--gguf", &ggufText } })) {
        std::fprintf(stderr, "usage: bench_parts [--dir CHECKPOINT] [--work DIR] [--gb 1.2] [--ranks 4] "
                             "[--parts 1,2,4] [--threads T] [--max_shard_size 5GB] [--rounds 2] [--keep] "
                             "[--gguf %s]\n", ggufOutTypeChoices("|", "|").c_str());
        return 2;
    }
    if (!ggufText.empty() && !(g_gguf = ggufOutTypeFromName(ggufText))) {
        std::fprintf(stderr, "--gguf must be %s\n", ggufOutTypeChoices().c_str());
        return 2;
    }
    auto maxShard = parseByteSize(shardText);
    if (!maxShard || *maxShard == 0) {
        std::fprintf(stderr, "--max_shard_size: not a size\n");
        return 2;
    }
    fs::create_directories(work);
    if (dir.empty()) {
        dir = work + "/actor";
        if (!fs::exists(dir + "/fsdp_config.json")) {
            std::printf("writing a %.2f GB synthetic checkpoint in %d ranks to %s\n", gb, ranks, dir.c_str());
            const auto written = runInChild([&] { return writeCheckpoint(dir, gb, ranks) ? 0 : 1; });
            if (!written.ok) {
                std::fprintf(stderr, "cannot write the checkpoint\n");
                return 1;
            }
        }
        if (g_gguf)
            writeLlamaConfig(dir + "/huggingface", gb);
    }
    auto info = scanCheckpoint(dir);
    if (!info) {
        std::fprintf(stderr, "%s\n", info.error().message.c_str());
        return 1;
    }
    std::vector<std::string> sources;
    for (const auto& f : info->files)
        sources.push_back(f);
    MergeOptions options;
    options.maxShardSize = *maxShard;
    auto plan = planMerge(*info, options);
    if (!plan) {
        std::fprintf(stderr, "%s\n", plan.error().message.c_str());
        return 1;
    }
    const unsigned cores = static_cast<unsigned>(resolveThreads(0));
    // What is measured: the merge's files, or with --gguf the one GGUF file.
    std::optional<GgufPlan> gguf;
    if (g_gguf) {
        GgufOptions o;
        o.outType = g_gguf;
        auto planned = planGgufMerge(*info, o);
        if (!planned) {
            std::fprintf(stderr, "%s\n", planned.error().message.c_str());
            return 1;
        }
        gguf = std::move(*planned);
    }
    const std::string outFile = gguf ? gguf->fileName : plan->files.front().name;
    const std::uint64_t outBytes = gguf ? gguf->fileSize : plan->totalBytes;
    std::printf("checkpoint: %s, %s of tensors in %zu output file(s), largest tensor %s; %u cores%s\n", dir.c_str(),
                formatBytes(plan->totalBytes).c_str(), plan->files.size(),
                formatBytes(plan->largestTensorBytes).c_str(), cores,
                gguf ? (", exported as " + outFile + " (" + formatBytes(outBytes) + ")").c_str() : "");

    double bestCopy = 0;
    for (int r = 0; r < rounds; ++r) {
        std::uint64_t copied = 0;
        const double t = plainCopy(sources, work + "/copy", copied);
        bestCopy = r == 0 ? t : std::min(bestCopy, t);
    }
    fs::remove_all(work + "/copy");
    std::printf("plain copy of the rank files: %.2f s (%.0f MB/s), best of %d\n", bestCopy,
                double(plan->totalBytes) / 1e6 / bestCopy, rounds);

    std::printf("\n%5s %8s %10s %12s %14s %14s  %s\n", "parts", "threads", "wall s", "MB/s", "time/copy", "max share",
                "per-part peak RSS");
    {
        // The single-process merge, for comparison.
        double best = 0;
        long peak = 0;
        for (int r = 0; r < rounds; ++r) {
            const std::string target = work + "/merged";
            fs::remove_all(target);
            const auto run = runInChild([&] {
                auto scanned = scanCheckpoint(dir);
                if (!scanned)
                    return 1;
                MergeOptions o;
                o.maxShardSize = *maxShard;
                auto p = planMerge(*scanned, o);
                if (!p)
                    return 1;
                MergeRunOptions runOptions;
                runOptions.threads = cores;
                if (g_gguf) {
                    GgufOptions go;
                    go.outType = g_gguf;
                    auto g = planGgufMerge(*scanned, go);
                    return g && writeGgufFile(*g, target, runOptions) ? 0 : 1;
                }
                return mergeCheckpoint(*scanned, *p, target, runOptions) ? 0 : 1;
            });
            if (!run.ok) {
                std::fprintf(stderr, "the single merge failed\n");
                return 1;
            }
            if (r == 0 || run.seconds < best)
                best = run.seconds, peak = run.peakKb;
        }
        std::printf("%5s %8u %10.2f %12.0f %13.2fx %14s  %ld MB\n", gguf ? "gguf" : "merge", cores, best,
                    double(outBytes) / 1e6 / best, best / bestCopy, formatBytes(outBytes).c_str(), peak / 1024);
    }
    for (unsigned parts : parseList(partsText)) {
        if (parts == 0)
            continue;
        const unsigned threads = threadsFlag > 0 ? static_cast<unsigned>(threadsFlag) : std::max(1u, cores / parts);
        double best = 0;
        std::vector<PartRun> bestRuns;
        bool ok = true;
        for (int r = 0; r < rounds && ok; ++r) {
            const std::string target = work + "/merged";
            fs::remove_all(target);
            double wall = 0;
            auto runs = runAllParts(dir, target, parts, threads, *maxShard, wall);
            ok = std::all_of(runs.begin(), runs.end(), [](const PartRun& p) { return p.ok; })
                && fs::exists(target + "/" + outFile);
            if (r == 0 || wall < best) {
                best = wall;
                bestRuns = runs;
            }
        }
        if (!ok) {
            std::printf("%5u  failed (see the messages above)\n", parts);
            continue;
        }
        const std::vector<MergeOutput> outputs { { &*info, &*plan, "" } };
        std::uint64_t maxShare = 0;
        if (gguf) {
            if (auto g = planGgufParts(*gguf, parts))
                for (const auto& s : g->plan.shares)
                    maxShare = std::max(maxShare, s.bytes);
        } else if (auto assignment = planParts(outputs, parts)) {
            for (const auto& s : assignment->shares)
                maxShare = std::max(maxShare, s.bytes);
        }
        std::string rss;
        for (const auto& p : bestRuns)
            rss += (rss.empty() ? "" : ", ") + std::to_string(p.peakKb / 1024) + " MB";
        std::printf("%5u %8u %10.2f %12.0f %13.2fx %14s  %s\n", parts, threads, best,
                    double(outBytes) / 1e6 / best, best / bestCopy, formatBytes(maxShare).c_str(), rss.c_str());
    }
    if (!keep)
        fs::remove_all(work + "/merged");
    return 0;
}
