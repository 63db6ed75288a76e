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
    std::size_t got = 0;
    // Read what stat promised and no more: a file that grows meanwhile cannot make this unbounded.
    while (got < text.size()) {
        const ssize_t n = ::pread(file.fd(), text.data() + got, text.size() - got, static_cast<off_t>(got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return makeError(path + ": cannot read: " + std::strerror(errno));
        if (n == 0)
            break;
        got += static_cast<std::size_t>(n);
    }
    text.resize(got);
    return text;
}

} // namespace tessera
