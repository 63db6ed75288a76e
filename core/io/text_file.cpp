// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/text_file.h"

#include "io/byte_size.h"
#include "io/regular_file.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace tessera {

Result<std::string> readTextFile(const std::string& path, std::uint64_t maxBytes)
{
    auto file = RegularFile::open(path);
    TESSERA_TRY(file);
    return readTextFile(*file, path, maxBytes);
}

Result<std::string> readTextFile(const RegularFile& file, const std::string& path, std::uint64_t maxBytes)
{
    if (file.size() > maxBytes)
        return makeError(path + ": is " + formatBytes(file.size()) + ", more than the "
                         + formatBytes(maxBytes) + " a file of this kind can hold; it is not one");
    std::string text(static_cast<std::size_t>(file.size()), '\0');
    // Read what stat promised and no more: a file that grows meanwhile cannot make this unbounded.
    auto got = readAt(file.fd(), reinterpret_cast<std::uint8_t*>(text.data()), text.size(), 0);
    if (!got)
        return got.error().withContext(path);
    text.resize(static_cast<std::size_t>(*got));
    return text;
}

} // namespace tessera
