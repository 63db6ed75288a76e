// SPDX-License-Identifier: GPL-3.0-or-later
#include "pickle/torch_zip_writer.h"

#include "io/crc32.h"

namespace tessera {

std::string ZipWriter::contentKey() const
{
    std::string key;
    for (const Record& r : m_records)
        key += r.name + ":" + std::to_string(r.crc) + ";";
    return key;
}

bool ZipWriter::begin(const std::string& record, std::uint64_t size)
{
    Record r;
    r.name = m_prefix + "/" + record;
    r.offset = m_cursor;
    r.size = size;
    // FB padding so the payload starts on a 64-byte boundary, as PyTorchStreamWriter does.
    const std::uint64_t start = m_cursor + 30 + r.name.size() + 4;
    const std::uint64_t padding = (64 - start % 64) % 64;
    std::string h;
    u(h, 0x04034b50, 4);
    entryFields(h);
    u(h, 0, 4);
    u(h, 0, 4);
    u(h, 0, 4);
    u(h, r.name.size(), 2);
    u(h, 4 + padding, 2);
    h += r.name;
    h += "FB";
    u(h, padding, 2);
    h.append(padding, 'Z');
    m_records.push_back(r);
    m_crc = 0;
    m_written = 0;
    return write(h.data(), h.size());
}

bool ZipWriter::data(const void* bytes, std::uint64_t n)
{
    m_crc = crc32Update(m_crc, static_cast<const std::uint8_t*>(bytes), static_cast<std::size_t>(n));
    m_written += n;
    return write(bytes, n);
}

bool ZipWriter::end()
{
    Record& r = m_records.back();
    r.crc = m_crc;
    std::string d;
    u(d, 0x08074b50, 4);
    u(d, r.crc, 4);
    if (r.size >= 0xFFFFFFFFu) {
        u(d, r.size, 8);
        u(d, r.size, 8);
    } else {
        u(d, r.size, 4);
        u(d, r.size, 4);
    }
    return write(d.data(), d.size());
}

bool ZipWriter::finish()
{
    const std::uint64_t cdStart = m_cursor;
    std::string cd;
    bool zip64 = m_records.size() >= 0xFFFF;
    for (const Record& r : m_records) {
        const bool bigSize = r.size >= 0xFFFFFFFFu, bigOffset = r.offset >= 0xFFFFFFFFu;
        std::string extra;
        if (bigSize || bigOffset) {
            zip64 = true;
            u(extra, 0x0001, 2);
            u(extra, (bigSize ? 16 : 0) + (bigOffset ? 8 : 0), 2);
            if (bigSize) {
                u(extra, r.size, 8);
                u(extra, r.size, 8);
            }
            if (bigOffset)
                u(extra, r.offset, 8);
        }
        u(cd, 0x02014b50, 4);
        u(cd, 45, 2); // version made by
        entryFields(cd);
        u(cd, r.crc, 4);
        u(cd, bigSize ? 0xFFFFFFFFu : r.size, 4);
        u(cd, bigSize ? 0xFFFFFFFFu : r.size, 4);
        u(cd, r.name.size(), 2);
        u(cd, extra.size(), 2);
        u(cd, 0, 2);
        u(cd, 0, 2);
        u(cd, 0, 2);
        u(cd, 0, 4);
        u(cd, bigOffset ? 0xFFFFFFFFu : r.offset, 4);
        cd += r.name;
        cd += extra;
    }
    if (!write(cd.data(), cd.size()))
        return false;
    const std::uint64_t cdSize = cd.size();
    zip64 = zip64 || cdStart >= 0xFFFFFFFFu;
    std::string tail;
    if (zip64) {
        const std::uint64_t eocd64 = m_cursor;
        u(tail, 0x06064b50, 4);
        u(tail, 44, 8);
        u(tail, 45, 2);
        u(tail, 45, 2);
        u(tail, 0, 4);
        u(tail, 0, 4);
        u(tail, m_records.size(), 8);
        u(tail, m_records.size(), 8);
        u(tail, cdSize, 8);
        u(tail, cdStart, 8);
        u(tail, 0x07064b50, 4);
        u(tail, 0, 4);
        u(tail, eocd64, 8);
        u(tail, 1, 4);
    }
    u(tail, 0x06054b50, 4);
    u(tail, 0, 2);
    u(tail, 0, 2);
    u(tail, zip64 ? 0xFFFF : m_records.size(), 2);
    u(tail, zip64 ? 0xFFFF : m_records.size(), 2);
    u(tail, zip64 ? 0xFFFFFFFFu : cdSize, 4);
    u(tail, zip64 ? 0xFFFFFFFFu : cdStart, 4);
    u(tail, 0, 2);
    return write(tail.data(), tail.size());
}

void ZipWriter::u(std::string& s, std::uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        s += static_cast<char>((v >> (8 * i)) & 0xFF);
}

void ZipWriter::entryFields(std::string& s)
{
    u(s, 45, 2);
    u(s, 0x0808, 2);
    u(s, 0, 2);
    u(s, 0, 2);
    u(s, 33, 2);
}

bool ZipWriter::write(const void* p, std::uint64_t n)
{
    m_cursor += n;
    return std::fwrite(p, 1, n, m_file) == n;
}

} // namespace tessera
