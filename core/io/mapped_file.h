// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "result.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace tessera {

/// A read-only view of bytes that keeps its backing storage (an mmap) alive.
/// Every access is bounds-checked; a view can be narrowed without copying.
class ByteView {
public:
    ByteView() = default;
    ByteView(std::shared_ptr<const void> owner, const std::uint8_t* data, std::uint64_t size)
        : m_owner(std::move(owner)), m_data(data), m_size(size)
    {
    }

    const std::uint8_t* data() const { return m_data; }
    std::uint64_t size() const { return m_size; }
    bool empty() const { return m_size == 0; }

    /// True when [offset, offset+length) lies inside this view (no overflow).
    bool contains(std::uint64_t offset, std::uint64_t length) const
    {
        return offset <= m_size && length <= m_size - offset;
    }
    /// The sub-view [offset, offset+length), or nullopt-like empty Result when out of bounds.
    Result<ByteView> slice(std::uint64_t offset, std::uint64_t length) const;
    std::string_view asString() const { return { reinterpret_cast<const char*>(m_data), static_cast<size_t>(m_size) }; }

    /// Little-endian integer reads; callers check bounds with contains() first.
    std::uint16_t u16(std::uint64_t offset) const;
    std::uint32_t u32(std::uint64_t offset) const;
    std::uint64_t u64(std::uint64_t offset) const;

    const std::shared_ptr<const void>& owner() const { return m_owner; }

private:
    std::shared_ptr<const void> m_owner;
    const std::uint8_t* m_data = nullptr;
    std::uint64_t m_size = 0;
};

/// A file mapped read-only into memory. Zero copy: tensor bytes are read straight from the mapping.
class MappedFile {
public:
    /// Maps `path`; an empty file yields an empty view. Errors name the path.
    static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::string& path() const { return m_path; }
    std::uint64_t size() const { return m_size; }
    /// A view over the whole file that keeps this mapping alive.
    ByteView view() const;

    /// Tells the kernel a range will be read sequentially soon / is no longer needed.
    void adviseWillNeed(std::uint64_t offset, std::uint64_t length) const;
    void adviseDontNeed(std::uint64_t offset, std::uint64_t length) const;

private:
    MappedFile() = default;
    std::string m_path;
    void* m_addr = nullptr;
    std::uint64_t m_size = 0;
    std::weak_ptr<const MappedFile> m_self;
};

} // namespace tessera
