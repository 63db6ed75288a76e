// SPDX-License-Identifier: GPL-3.0-or-later
// The ZIP reader as torch.save archives and DCP items use it: the central directory (ZIP64 too), then every
// record read whole, which checks its bounds, its compression method and its CRC-32.

#include "fuzz_targets.h"

#include "io/zip_archive.h"

namespace tessera::fuzz {

int fuzzZip(const std::uint8_t* data, std::size_t size)
{
    const ByteView bytes(nullptr, data, size);
    (void)looksLikeZip(bytes);
    (void)looksLikeLegacyTorchSave(bytes);
    auto archive = ZipArchive::open(bytes, "fuzz.zip");
    if (!archive)
        return 0;
    for (const auto& entry : archive->entries())
        (void)archive->read(entry);
    (void)archive->findRecord("data.pkl");
    return 0;
}

} // namespace tessera::fuzz
