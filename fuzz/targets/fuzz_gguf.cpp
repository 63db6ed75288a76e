// SPDX-License-Identifier: GPL-3.0-or-later
// A GGUF file's header: metadata of every value type (arrays of strings and numbers), tensor infos, alignment,
// and every tensor's data checked against the file's size; then the names mapped back to Hugging Face's, and the
// file read as a checkpoint: every tensor (re-indexed rotary rows, split experts, Q8_0 blocks dequantized)
// assembled as diff and inspect assemble it.

#include "fuzz_targets.h"

#include "formats/gguf_file.h"
#include "formats/gguf_names.h"
#include "formats/gguf_reader.h"
#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "scratch_folder.h"

#include <vector>

namespace tessera::fuzz {

int fuzzGguf(const std::uint8_t* data, std::size_t size)
{
    const ByteView bytes(nullptr, data, size);
    auto header = parseGgufHeader(bytes);
    if (!header)
        return 0;
    for (const auto& kv : header->metadata)
        (void)kv.value.summary(64);
    for (const auto& t : header->tensors)
        (void)hfTensorName(t.name, 0, false);
    auto info = scanGgufFile(writeScratchFile("model.gguf", data, size));
    if (!info)
        return 0;
    SourceFiles files;
    std::vector<std::uint8_t> values;
    for (std::size_t i = 0; i < info->tensors.size(); ++i) {
        const TensorInfo& t = info->tensors[i];
        if (t.numel() > (1u << 22))
            continue; // a header may claim any size; the data was checked against the file, the buffer is ours
        auto planned = planTensorCopy(t, i, DType::Float32);
        if (!planned)
            continue;
        values.resize(static_cast<std::size_t>(planned->bytes));
        (void)materializeTensor(files, t, *planned, values.data());
    }
    return 0;
}

} // namespace tessera::fuzz
