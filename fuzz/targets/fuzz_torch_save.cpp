// SPDX-License-Identifier: GPL-3.0-or-later
// A whole torch.save file as the verl FSDP reader reads a rank file: the ZIP archive, data.pkl through the
// unpickler, every value interpreted as a plain tensor, DTensor or ShardedTensor, and every piece checked to lie
// inside its storage record.

#include "fuzz_targets.h"
#include "scratch_folder.h"

#include "formats/layouts.h"

namespace tessera::fuzz {

int fuzzTorchSave(const std::uint8_t* data, std::size_t size)
{
    const std::string path = writeScratchFile("torch_save/model_world_size_1_rank_0.pt", data, size);
    (void)scanTorchSaveFile(path);
    return 0;
}

} // namespace tessera::fuzz
