// SPDX-License-Identifier: GPL-3.0-or-later
// The two configs a Megatron merge takes sizes from: verl's transformer_config.json (parallel sizes, layer split,
// model sizes, then the layer arithmetic and shape checks that use them) and Hugging Face's config.json (then
// the family's rules and every parameter it expects). The same input is written as both.

#include "fuzz_targets.h"
#include "scratch_folder.h"

#include "formats/megatron_config.h"
#include "mapping/hf_expected.h"

#include <algorithm>

namespace tessera::fuzz {

namespace {

void useTransformerConfig(const MegatronConfig& config)
{
    // Only a few stages: the arithmetic, not the loop, is what hostile sizes could break.
    const std::int64_t stages = std::clamp<std::int64_t>(config.pipelineParallel ? *config.pipelineParallel : 1, 1, 4);
    const std::int64_t virtualStages = std::clamp<std::int64_t>(config.virtualPipeline ? *config.virtualPipeline : 1, 1, 3);
    for (int pp = 0; pp < stages; ++pp)
        for (int vp = 0; vp < virtualStages; ++vp) {
            (void)megatronLayerOffset(config, pp, vp);
            (void)megatronStageLayers(config, pp, vp);
        }
    const Shape square { 64, 64 };
    for (const char* name : { "decoder.layers.0.self_attention.linear_qkv.weight",
                              "decoder.layers.0.self_attention.linear_proj.weight",
                              "decoder.layers.0.mlp.linear_fc1.weight", "decoder.layers.0.mlp.linear_fc2.weight",
                              "embedding.word_embeddings.weight" })
        (void)checkShapeAgainstConfig(name, square, 0, config);
    (void)checkShapeAgainstConfig("decoder.layers.self_attention.linear_qkv.weight", Shape { 4, 64, 64 }, 1, config);
}

void useHfConfig(const HfModelConfig& config)
{
    auto rules = selectMappingRules(config.architectures, config.modelType);
    if (!rules)
        return;
    auto vars = resolveConfigVars(config, *rules, {});
    if (!vars)
        return;
    (void)expectedHfParameters(*rules, *vars);
}

} // namespace

int fuzzModelConfig(const std::uint8_t* data, std::size_t size)
{
    const std::string megatronPath = writeScratchFile("model_config/transformer_config.json", data, size);
    writeScratchFile("model_config/config.json", data, size);
    if (auto config = readTransformerConfig(megatronPath))
        useTransformerConfig(*config);
    if (auto config = readHfModelConfig(scratchFolder() + "/model_config"))
        useHfConfig(*config);
    return 0;
}

} // namespace tessera::fuzz
