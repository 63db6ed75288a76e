// SPDX-License-Identifier: GPL-3.0-or-later
// A PyTorch DCP folder's .metadata: the pickled Metadata object, its tensor entries, chunks and storage entries.
// The .distcp files it names are absent, which the reader must report per tensor rather than fail on.

#include "fuzz_targets.h"
#include "scratch_folder.h"

#include "formats/layouts.h"

namespace tessera::fuzz {

int fuzzDcpMetadata(const std::uint8_t* data, std::size_t size)
{
    const std::string path = writeScratchFile("dcp/checkpoint/.metadata", data, size);
    (void)scanDcp(scratchFolder() + "/dcp/checkpoint", 1, silentProgress());
    return 0;
}

} // namespace tessera::fuzz
