// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/mapped_file.h"
#include "io/regular_file.h"

#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace tessera {

namespace {
template <typename T>
T readLe(const std::uint8_t* p)
{
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
        v |= static_cast<T>(p[i]) << (8 * i);
    return v;
}
} // namespace

Result<ByteView> ByteView::slice(std::uint64_t offset, std::uint64_t length) const
{
    if (!contains(offset, length))
        return makeError("range [" + std::to_string(offset) + ", +" + std::to_string(length)
                         + ") lies outside the " + std::to_string(m_size) + " bytes available");
    return ByteView(m_owner, m_data + offset, length);
}

std::uint16_t ByteView::u16(std::uint64_t offset) const { return readLe<std::uint16_t>(m_data + offset); }
std::uint32_t ByteView::u32(std::uint64_t offset) const { return readLe<std::uint32_t>(m_data + offset); }
std::uint64_t ByteView::u64(std::uint64_t offset) const { return readLe<std::uint64_t>(m_data + offset); }

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path)
{
    auto regular = RegularFile::open(path);
    TESSERA_TRY(regular);
    std::shared_ptr<MappedFile> file(new MappedFile);
    file->m_path = path;
    file->m_size = regular->size();
    if (file->m_size > 0) {
        void* addr = ::mmap(nullptr, file->m_size, PROT_READ, MAP_PRIVATE, regular->fd(), 0);
        if (addr == MAP_FAILED)
            return makeError(path + ": cannot map into memory: " + std::strerror(errno));
        file->m_addr = addr;
    }
    file->m_self = file; // the mapping stays valid after the descriptor is closed
    return file;
}

MappedFile::~MappedFile()
{
    if (m_addr)
        ::munmap(m_addr, m_size);
}

ByteView MappedFile::view() const
{
    return ByteView(m_self.lock(), static_cast<const std::uint8_t*>(m_addr), m_size);
}

namespace {
void advise(void* base, std::uint64_t fileSize, std::uint64_t offset, std::uint64_t length, int advice)
{
    if (!base || offset >= fileSize)
        return;
    const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t start = offset / page * page;
    const std::uint64_t end = std::min(fileSize, offset + length);
    ::madvise(static_cast<std::uint8_t*>(base) + start, end - start, advice);
}
} // namespace

void MappedFile::adviseWillNeed(std::uint64_t offset, std::uint64_t length) const
{
    advise(m_addr, m_size, offset, length, MADV_WILLNEED);
}

void MappedFile::adviseDontNeed(std::uint64_t offset, std::uint64_t length) const
{
    advise(m_addr, m_size, offset, length, MADV_DONTNEED);
}

} // namespace tessera
