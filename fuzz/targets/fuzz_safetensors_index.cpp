// SPDX-License-Identifier: GPL-3.0-or-later
// model.safetensors.index.json in a folder that also holds one small valid shard, so the checks of the index
// against the shards it names (missing, unlisted, misplaced tensors, names that leave the folder) all run.

#include "fuzz_targets.h"
#include "scratch_folder.h"

#include "formats/safetensors_reader.h"

#include <cstring>

namespace tessera::fuzz {

namespace {

/// A valid shard holding "model.norm.weight" (F32 [2]) and "lm_head.weight" (F32 [1]); the seeds name it.
std::string tinyShard()
{
    std::string header = R"({"model.norm.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("lm_head.weight":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
    while (header.size() % 8)
        header += ' ';
    std::string file(8, '\0');
    const std::uint64_t length = header.size();
    for (int i = 0; i < 8; ++i)
        file[static_cast<std::size_t>(i)] = static_cast<char>((length >> (8 * i)) & 0xff);
    return file + header + std::string(12, '\x01');
}

} // namespace

int fuzzSafetensorsIndex(const std::uint8_t* data, std::size_t size)
{
    static const bool shardWritten = [] {
        writeScratchFile("safetensors_index/model-00001-of-00002.safetensors", tinyShard());
        return true;
    }();
    (void)shardWritten;
    const std::string path = writeScratchFile("safetensors_index/model.safetensors.index.json", data, size);
    (void)scanSafetensorsFolder(path);
    return 0;
}

} // namespace tessera::fuzz
