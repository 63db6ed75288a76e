// SPDX-License-Identifier: GPL-3.0-or-later
// Resume benchmark (not a test): makes a large synthetic verl FSDP2 run with its whole training state (fp32 model
// files, AdamW's optimizer files with exp_avg and exp_avg_sq, extra state per rank), reshards it to another world
// size through the same request path as `tessera split`, in a child process, and prints the time against a plain
// copy of the same bytes and the split's peak RSS against the 2 × largest tensor + 64 MiB bound.
//
//   bench_resume [--work DIR] [--gb 0.6] [--ranks 4] [--to 3] [--rounds 2]

#include "bench_args.h"
#include "bench_timing.h"
#include "io/byte_size.h"
#include "ops/prepare_split.h"
#include "pickle/pickle_writer.h"
#include "split/split_training.h"
#include "synthetic_checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <iostream>

using namespace tessera;
using namespace tessera::bench;
namespace fs = std::filesystem;

namespace {

/// {"state": {i: {"step": T, "exp_avg": T, "exp_avg_sq": T}}, "param_groups": [{"lr": …, "params": [0..n-1]}]},
/// the tensors as placeholders 0, 1, 2, … in that order.
PyRef optimizerSkeleton(std::size_t parameters)
{
    auto value = [](PyValue::Kind kind) {
        auto v = std::make_shared<PyValue>();
        v->kind = kind;
        return v;
    };
    auto str = [&](const std::string& text) {
        auto v = value(PyValue::Kind::Str);
        v->text = text;
        return v;
    };
    auto integer = [&](std::int64_t i) {
        auto v = value(PyValue::Kind::Int);
        v->integer = i;
        return v;
    };
    auto state = value(PyValue::Kind::Dict);
    std::int64_t next = 0;
    for (std::size_t p = 0; p < parameters; ++p) {
        auto entry = value(PyValue::Kind::Dict);
        for (const char* key : { "step", "exp_avg", "exp_avg_sq" }) {
            auto placeholder = value(PyValue::Kind::Tensor);
            placeholder->integer = next++;
            entry->entries.emplace_back(str(key), placeholder);
        }
        state->entries.emplace_back(integer(static_cast<std::int64_t>(p)), entry);
    }
    auto group = value(PyValue::Kind::Dict);
    auto lr = value(PyValue::Kind::Float);
    lr->real = 1e-5;
    group->entries.emplace_back(str("lr"), lr);
    auto params = value(PyValue::Kind::List);
    for (std::size_t p = 0; p < parameters; ++p)
        params->items.push_back(integer(static_cast<std::int64_t>(p)));
    group->entries.emplace_back(str("params"), params);
    auto groups = value(PyValue::Kind::List);
    groups->items.push_back(group);
    auto root = value(PyValue::Kind::Dict);
    root->entries.emplace_back(str("state"), state);
    root->entries.emplace_back(str("param_groups"), groups);
    return root;
}

/// optim_world_size_R_rank_r.pt for every rank: fp32 moments of every parameter of the synthetic model, sharded as
/// the model is, written with the project's own writer (the bytes are noise; only their size matters here).
Status writeOptimizerFiles(const std::string& dir, double gb, int ranks)
{
    const auto model = syntheticModel(gb);
    const PyRef skeleton = optimizerSkeleton(model.size());
    DeviceMesh mesh { { ranks }, { "fsdp" }, {} };
    for (int r = 0; r < ranks; ++r)
        mesh.ranks.push_back(r);
    std::vector<std::uint8_t> noise(16u << 20, 0x3C);
    for (int r = 0; r < ranks; ++r) {
        std::vector<TorchSaveTensor> tensors;
        for (const auto& g : model)
            for (const char* key : { "step", "exp_avg", "exp_avg_sq" }) {
                TorchSaveTensor t;
                t.name = g.name + "." + key;
                t.dtype = DType::Float32;
                if (std::string(key) != "step") {
                    t.dtensor = true;
                    t.globalShape = g.shape;
                    t.placements = { Placement::shard(0) };
                    t.mesh = mesh;
                    t.coordinate = { r };
                    t.shape = g.shape;
                    t.shape[0] = chunkRange(g.shape[0], ranks, r).size;
                }
                tensors.push_back(std::move(t));
            }
        const std::string name = "optim_world_size_" + std::to_string(ranks) + "_rank_" + std::to_string(r);
        const std::string path = dir + "/" + name + ".pt";
        std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
        if (!file)
            return makeError(path + ": cannot be created");
        auto writer = TorchSaveWriter::begin(file.get(), path, name, tensors, TorchSaveWriter::Value::Tree, {}, {}, {},
                                             skeleton.get());
        TESSERA_TRY(writer);
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            TESSERA_TRY((*writer)->beginStorage(i));
            for (std::uint64_t left = tensors[i].storageBytes(); left;) {
                const std::uint64_t n = std::min<std::uint64_t>(left, noise.size());
                TESSERA_TRY((*writer)->append(noise.data(), n));
                left -= n;
            }
            TESSERA_TRY((*writer)->endStorage());
        }
        TESSERA_TRY((*writer)->finish());
    }
    return Status::success();
}

/// extra_state_world_size_R_rank_r.pt: a scheduler state (the same on every rank) and a per-rank seed.
Status writeExtraState(const std::string& dir, int ranks)
{
    for (int r = 0; r < ranks; ++r) {
        Pickler p;
        p.op('\x80');
        p.op('\x02');
        p.op('}');
        p.op('(');
        p.str("lr_scheduler");
        p.op('}');
        p.op('(');
        p.str("last_epoch");
        p.integer(100);
        p.op('u');
        p.str("rng");
        p.integer(1234 + r);
        p.op('u');
        p.op('.');
        const std::string name = "extra_state_world_size_" + std::to_string(ranks) + "_rank_" + std::to_string(r);
        TESSERA_TRY(writeTorchSavePickle(dir + "/" + name + ".pt", name, p.out));
    }
    return Status::success();
}

} // namespace

int main(int argc, char** argv)
{
    std::string work = fs::temp_directory_path().string() + "/tessera-bench-resume";
    double gb = 0.6;
    int ranks = 4, to = 3, rounds = 2;
    if (!parseFlags(argc, argv, { { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks }, { "--to", &to },
                                  { "--rounds", &rounds } })) {
        std::cerr << "usage: bench_resume [--work DIR] [--gb 0.6] [--ranks 4] [--to 3] [--rounds 2]\n";
        return 2;
    }
    const std::string actor = work + "/run/global_step_1/actor";
    if (!fs::exists(actor + "/fsdp_config.json")) {
        std::cout << "writing a synthetic run (" << gb << " GB of bf16 weights, stored as fp32, with AdamW's state) to "
                  << actor << "\n";
        fs::remove_all(work + "/run");
        auto written = writeCheckpoint(actor, gb, ranks, 4096, 0, 0, DType::Float32);
        if (written)
            written = writeOptimizerFiles(actor, gb, ranks);
        if (written)
            written = writeExtraState(actor, ranks);
        if (!written) {
            std::cerr << written.error().message << "\n";
            return 1;
        }
    }
    SplitRequest request;
    request.localDir = actor;
    request.worldSize = std::to_string(to);
    request.targetDir = work + "/out/global_step_1/actor";
    fs::remove_all(work + "/out");
    const PreparedSplit prepared = prepareSplit(request);
    if (!prepared.runnable()) {
        std::cerr << (prepared.refusal ? prepared.refusal->error.message : prepared.target.error().message) << "\n";
        return 1;
    }
    const SplitPlan& plan = *prepared.plan;
    std::vector<std::string> sources;
    for (const auto& entry : fs::directory_iterator(actor))
        if (entry.is_regular_file())
            sources.push_back(entry.path().string());
    std::cout << "reshard: " << ranks << " → " << to << " ranks, " << formatBytes(plan.totalBytes) << " of model and "
              << formatBytes(plan.training ? plan.training->bytes : 0) << " of optimizer state; largest tensor "
              << formatBytes(plan.largestTensorBytes) << "\n";
    double bestCopy = 1e30, bestSplit = 1e30;
    long peakKb = 0;
    std::uint64_t copied = 0;
    for (int round = 0; round < rounds; ++round) {
        bestCopy = std::min(bestCopy, plainCopy(sources, work + "/copy", copied));
        fs::remove_all(work + "/copy");
        fs::remove_all(work + "/out");
        const ChildRun split = runInChild([&] {
            auto outcome = runPreparedSplit(prepareSplit(request), {});
            if (!outcome)
                std::cerr << outcome.error().message << "\n";
            return outcome ? 0 : 5;
        });
        if (!split.ok) {
            std::cerr << "split failed\n";
            return 1;
        }
        bestSplit = std::min(bestSplit, split.seconds);
        peakKb = std::max(peakKb, split.peakKb);
        std::cout << "round " << round + 1 << ": split " << split.seconds << " s\n";
    }
    fs::remove_all(work + "/out");
    const std::uint64_t bound = 2 * plan.largestTensorBytes + (64u << 20);
    std::cout << "plain copy: " << formatBytes(copied) << " in " << bestCopy << " s = " << copied / bestCopy / 1e9 << " GB/s\n";
    std::cout << "reshard:    " << bestSplit << " s, ratio reshard/copy " << bestSplit / bestCopy << "\n";
    std::cout << "peak RSS of the reshard: " << formatBytes(static_cast<std::uint64_t>(peakKb) * 1024)
              << " (bound 2 × largest tensor + 64 MiB = " << formatBytes(bound) << ")\n";
    return 0;
}
