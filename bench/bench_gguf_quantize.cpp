// SPDX-License-Identifier: GPL-3.0-or-later
// Quantized GGUF benchmark (not a test): the one-step export (`tessera merge --format gguf --outtype q4_k_m`
// straight from the training shards) against the two-step path users take today (the lossless bf16 export, then
// llama.cpp's own quantizer, llama_model_quantize from node-llama-cpp's libllama, on that file), both at the same
// thread count, in the same run, on the same synthetic verl FSDP2 checkpoint (bf16, about --gb GB). Prints both
// times and the one-step export's peak RSS against the 2 × largest tensor + 64 MiB bound.
//
//   bench_gguf_quantize --libdir DIR [--work DIR] [--gb 1.33] [--ranks 4] [--outtype q4_k_m] [--rounds 2]
//                       [--threads 2]
// DIR: node_modules/@node-llama-cpp/linux-x64/bins/linux-x64 of an `npm install node-llama-cpp@3.22.1`.

#include "bench_args.h"
#include "bench_timing.h"
#include "formats/scan.h"
#include "io/byte_size.h"
#include "merge/gguf_plan.h"
#include "synthetic_checkpoint.h"

#include <dlfcn.h>

#include <filesystem>
#include <iostream>

using namespace tessera;
using namespace tessera::bench;
namespace fs = std::filesystem;

namespace {

/// llama_model_quantize_params: only the two leading fields are set; the rest stays as the library's defaults
/// give it (the real struct is 64 bytes; the buffer is larger so a newer layout cannot overrun it).
struct QuantizeParams {
    std::int32_t nthread;
    std::int32_t ftype;
    std::uint8_t rest[248];
};

/// llama.cpp's quantizer from `libDir`, or an error message.
struct LlamaQuantizer {
    QuantizeParams (*defaults)() = nullptr;
    std::uint32_t (*quantize)(const char*, const char*, const QuantizeParams*) = nullptr;
    std::string error;

    explicit LlamaQuantizer(const std::string& libDir)
    {
        // libllama's dependencies first, global, as the loader would resolve them beside it.
        const auto load = [&](const std::string& prefix) -> void* {
            for (const auto& entry : fs::directory_iterator(libDir))
                if (entry.path().filename().string().rfind(prefix, 0) == 0 && entry.path().extension() == ".so")
                    return dlopen(entry.path().c_str(), RTLD_NOW | RTLD_GLOBAL);
            return nullptr;
        };
        for (const char* dependency : { "libggml-base.", "libggml.", "libllama-common." })
            load(dependency);
        void* lib = load("libllama.");
        if (!lib) {
            error = "no libllama under " + libDir;
            return;
        }
        if (auto init = reinterpret_cast<void (*)()>(dlsym(lib, "llama_backend_init")))
            init();
        defaults = reinterpret_cast<decltype(defaults)>(dlsym(lib, "llama_model_quantize_default_params"));
        quantize = reinterpret_cast<decltype(quantize)>(dlsym(lib, "llama_model_quantize"));
        if (!defaults || !quantize)
            error = "libllama has no llama_model_quantize";
    }
};

} // namespace

int main(int argc, char** argv)
{
    std::string work = fs::temp_directory_path().string() + "/tessera-bench-gguf-quantize", outtypeName = "q4_k_m",
                libDir;
    double gb = 1.33;
    int ranks = 4, rounds = 2, threads = 2;
    const auto outtype = [&] { return ggufOutTypeFromName(outtypeName); };
    if (!parseFlags(argc, argv,
                    { { "--work", &work }, { "--gb", &gb }, { "--ranks", &ranks }, { "--outtype", &outtypeName },
                      { "--rounds", &rounds }, { "--threads", &threads }, { "--libdir", &libDir } })
        || libDir.empty() || !outtype() || !ggufOutType(*outtype()).tensorTypeInfo().quantized() || threads < 1) {
        std::cerr << "usage: bench_gguf_quantize --libdir DIR [--work DIR] [--gb 1.33] [--ranks 4] [--outtype q4_k_m] "
                     "[--rounds 2] [--threads 2]\n";
        return 2;
    }
    const std::string actor = work + "/actor";
    if (!fs::exists(actor + "/model_world_size_" + std::to_string(ranks) + "_rank_0.pt")) {
        fs::remove_all(actor);
        std::cout << "writing a " << gb << " GB bf16 verl FSDP2 checkpoint (" << ranks << " ranks) to " << actor << "\n";
        if (auto written = writeCheckpoint(actor, gb, ranks, 4096, 0, 0, DType::BFloat16); !written) {
            std::cerr << written.error().message << "\n";
            return 1;
        }
    }
    writeLlamaConfig(actor + "/huggingface", gb, 4096);
    auto info = scanCheckpoint(actor);
    if (!info) {
        std::cerr << info.error().message << "\n";
        return 1;
    }
    std::uint64_t largest = 0;
    for (const auto& t : info->tensors)
        largest = std::max(largest, t.nbytes());
    std::cout << "checkpoint: " << info->tensors.size() << " tensors, " << formatBytes(info->totalBytes())
              << "; largest tensor " << formatBytes(largest) << "; " << threads << " threads\n";

    // Each path runs in a child, so its time and peak RSS are its own.
    const auto exportAs = [&](GgufOutType type, const std::string& target) {
        GgufOptions options;
        options.outType = type;
        options.threads = static_cast<unsigned>(threads);
        options.name = "bench";
        auto scanned = scanCheckpoint(actor);
        auto plan = scanned ? planGgufMerge(*scanned, options) : Result<GgufPlan>(scanned.error());
        MergeRunOptions run;
        run.threads = static_cast<unsigned>(threads);
        auto outcome = plan ? writeGgufFile(*plan, target, run) : Result<MergeOutcome>(plan.error());
        if (!outcome)
            std::cerr << outcome.error().message << "\n";
        return outcome ? 0 : 5;
    };
    const std::string quantized = std::string("bench-") + outtypeName + ".gguf";
    double bestOne = 1e30, bestTwo = 1e30;
    long peakOne = 0, peakTwo = 0;
    for (int round = 0; round < rounds; ++round) {
        fs::remove_all(work + "/one");
        fs::remove_all(work + "/two");
        const ChildRun one = runInChild([&] { return exportAs(*outtype(), work + "/one"); });
        const ChildRun two = runInChild([&] {
            if (int code = exportAs(GgufOutType::BF16, work + "/two"))
                return code;
            LlamaQuantizer llama(libDir);
            if (!llama.error.empty()) {
                std::cerr << llama.error << "\n";
                return 6;
            }
            QuantizeParams params = llama.defaults();
            params.nthread = threads;
            params.ftype = static_cast<std::int32_t>(ggufOutType(*outtype()).fileType);
            return llama.quantize((work + "/two/bench-bf16.gguf").c_str(), (work + "/two/" + quantized).c_str(),
                                  &params) == 0 ? 0 : 7;
        });
        if (!one.ok || !two.ok) {
            std::cerr << "a path failed\n";
            return 1;
        }
        bestOne = std::min(bestOne, one.seconds);
        bestTwo = std::min(bestTwo, two.seconds);
        peakOne = std::max(peakOne, one.peakKb);
        peakTwo = std::max(peakTwo, two.peakKb);
        std::cout << "round " << round + 1 << ": one step " << one.seconds << " s, two steps " << two.seconds << " s\n";
    }
    const std::uint64_t size = fs::file_size(work + "/one/" + quantized);
    const std::uint64_t bound = 2 * largest + (64u << 20);
    std::cout << outtypeName << " file: " << formatBytes(size) << "\n"
              << "one step (Tessera --outtype " << outtypeName << "): " << bestOne << " s, peak RSS "
              << formatBytes(static_cast<std::uint64_t>(peakOne) * 1024) << " (bound " << formatBytes(bound) << ")\n"
              << "two steps (bf16 export + llama_model_quantize): " << bestTwo << " s, peak RSS "
              << formatBytes(static_cast<std::uint64_t>(peakTwo) * 1024) << "\n"
              << "one step / two steps: " << bestOne / bestTwo << "\n";
    fs::remove_all(work + "/one");
    fs::remove_all(work + "/two");
    return 0;
}
