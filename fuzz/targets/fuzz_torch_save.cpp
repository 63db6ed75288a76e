// SPDX-License-Identifier: GPL-3.0-or-later
// A whole torch.save file as the verl FSDP reader reads a rank file: the ZIP archive, data.pkl through the
// unpickler, every value interpreted as a plain tensor, DTensor or ShardedTensor, and every piece checked to lie
// inside its storage record. The same bytes as an optimizer file (its state dict walked into a skeleton, every
// tensor leaf interpreted) and as an extra-state file copied under another name, as a split carries them.

#include "fuzz_targets.h"
#include "scratch_folder.h"

#include "formats/layouts.h"
#include "pickle/torch_save.h"
#include "pickle/torch_save_writer.h"

#include <filesystem>

namespace tessera::fuzz {

int fuzzTorchSave(const std::uint8_t* data, std::size_t size)
{
    const std::string path = writeScratchFile("torch_save/model_world_size_1_rank_0.pt", data, size);
    (void)scanTorchSaveFile(path);
    const std::string optimizer = writeScratchFile("torch_save/optim_world_size_1_rank_0.pt", data, size);
    (void)scanVerlFsdpOptimizer(std::filesystem::path(optimizer).parent_path().string(), 1, 1, silentProgress());
    if (auto extra = TorchSaveFile::open(path)) {
        (void)sameValue(extra->root(), extra->root());
        removeScratchFile("torch_save/extra_state_world_size_2_rank_1.pt");
        (void)writeRenamedTorchSave(*extra, scratchFolder() + "/torch_save/extra_state_world_size_2_rank_1.pt",
                                    "extra_state_world_size_2_rank_1");
    }
    return 0;
}

} // namespace tessera::fuzz
