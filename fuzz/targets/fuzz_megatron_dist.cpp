// SPDX-License-Identifier: GPL-3.0-or-later
// Megatron-core torch_dist's own files next to the DCP data: metadata.json (the backend) and common.pt (args,
// iteration). An input that starts like a ZIP archive is common.pt, anything else metadata.json; the other file
// holds what a healthy checkpoint has there, and .metadata is a valid, empty DCP Metadata.

#include "fuzz_targets.h"
#include "scratch_folder.h"

#include "formats/layouts.h"
#include "io/zip_archive.h"

namespace tessera::fuzz {

namespace {

/// Protocol-2 pickle of torch.distributed.checkpoint.metadata.Metadata() with empty state_dict_metadata and
/// storage_data, as a checkpoint without tensors would write it.
std::string emptyDcpMetadata()
{
    std::string p = "\x80\x02";
    p += "ctorch.distributed.checkpoint.metadata\nMetadata\n";
    p += ")\x81}(";
    auto key = [&](const std::string& name) {
        p += 'X';
        for (int i = 0; i < 4; ++i)
            p += static_cast<char>((name.size() >> (8 * i)) & 0xff);
        p += name;
        p += '}';
    };
    key("state_dict_metadata");
    key("storage_data");
    p += "ub.";
    return p;
}

const char* const kFolder = "megatron_dist/actor/dist_ckpt";

} // namespace

int fuzzMegatronDist(const std::uint8_t* data, std::size_t size)
{
    static const bool metadataWritten = [] {
        writeScratchFile(std::string(kFolder) + "/.metadata", emptyDcpMetadata());
        return true;
    }();
    (void)metadataWritten;
    const std::string folder = std::string(kFolder);
    if (looksLikeZip(ByteView(nullptr, data, size))) {
        writeScratchFile(folder + "/common.pt", data, size);
        writeScratchFile(folder + "/metadata.json", R"({"sharded_backend": "torch_dist", "sharded_backend_version": 1})");
    } else {
        writeScratchFile(folder + "/metadata.json", data, size);
        removeScratchFile(folder + "/common.pt");
    }
    (void)scanMegatronDist(scratchFolder() + "/" + folder, 1, silentProgress());
    return 0;
}

} // namespace tessera::fuzz
