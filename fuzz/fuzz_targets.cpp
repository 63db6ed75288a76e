// SPDX-License-Identifier: GPL-3.0-or-later
#include "fuzz_targets.h"

namespace tessera::fuzz {

const std::vector<FuzzTarget>& fuzzTargets()
{
    static const std::vector<FuzzTarget> targets {
        { "unpickler", fuzzUnpickler },
        { "zip", fuzzZip },
        { "torch_save", fuzzTorchSave },
        { "safetensors_header", fuzzSafetensorsHeader },
        { "safetensors_index", fuzzSafetensorsIndex },
        { "dcp_metadata", fuzzDcpMetadata },
        { "megatron_dist", fuzzMegatronDist },
        { "model_config", fuzzModelConfig },
        { "mapping_rules", fuzzMappingRules },
        { "regex", fuzzRegex },
        { "byte_size", fuzzByteSize },
        { "gguf", fuzzGguf },
        { "sentencepiece", fuzzSentencePiece },
    };
    return targets;
}

} // namespace tessera::fuzz
