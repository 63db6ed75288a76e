// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/safetensors_writer.h"

#include "formats/safetensors_reader.h"
#include "io/printable.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <numeric>
#include <set>
#include <string_view>
#include <unistd.h>

namespace tessera {

namespace {

/// Position of each code in the reference library's `enum Dtype`, which it sorts by (descending) when writing.
/// The enum "MUST be in increasing alignment order", so this is the alignment order with a fixed tie-break.
int dtypeRank(std::string_view code)
{
    static constexpr std::array<std::string_view, 22> kOrder { "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8",
        "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
        "C64", "F64", "I64", "U64" };
    const auto it = std::find(kOrder.begin(), kOrder.end(), code);
    return it == kOrder.end() ? -1 : static_cast<int>(it - kOrder.begin());
}

/// The two-character escape that serde_json and Python's json both give '"', '\\' and the five named control
/// characters, or nullptr for any other character (each writer treats those its own way).
const char* shortJsonEscape(std::uint32_t c)
{
    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        return nullptr;
    }
}

/// A JSON string as serde_json writes it: only '"', '\\' and control characters are escaped; \u escapes use
/// lowercase hex; everything else, including non-ASCII UTF-8 and DEL, is copied as is.
void appendSerdeString(std::string& out, std::string_view text)
{
    static constexpr char kHex[] = "0123456789abcdef";
    out += '"';
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (const char* escape = shortJsonEscape(c)) {
            out += escape;
        } else if (c < 0x20) {
            out += "\\u00";
            out += kHex[c >> 4];
            out += kHex[c & 0xF];
        } else {
            out += ch;
        }
    }
    out += '"';
}

std::string headerJson(const std::vector<SafetensorsEntry>& entries, const std::vector<std::size_t>& order,
    const std::vector<std::uint64_t>& relOffsets, const std::vector<std::uint64_t>& sizes,
    const std::map<std::string, std::string>& metadata)
{
    std::string json = "{";
    if (!metadata.empty()) {
        json += "\"__metadata__\":{";
        bool first = true;
        for (const auto& [key, value] : metadata) {
            if (!first)
                json += ',';
            first = false;
            appendSerdeString(json, key);
            json += ':';
            appendSerdeString(json, value);
        }
        json += '}';
    }
    for (const std::size_t index : order) {
        const SafetensorsEntry& e = entries[index];
        if (json.size() > 1)
            json += ',';
        appendSerdeString(json, e.name);
        json += ":{\"dtype\":\"";
        json += safetensorsCode(e.dtype);
        json += "\",\"shape\":";
        json += formatShape(e.shape);
        json += ",\"data_offsets\":[" + std::to_string(relOffsets[index]) + ","
            + std::to_string(relOffsets[index] + sizes[index]) + "]}";
    }
    return json + "}";
}

Status checkText(const std::string& text, const std::string& what)
{
    if (findInvalidUtf8(text) != std::string_view::npos)
        return makeError(what + " is not valid UTF-8, which a safetensors header requires");
    return {};
}

/// Byte size of one entry, or an error naming it.
Result<std::uint64_t> entryBytes(const SafetensorsEntry& e)
{
    const std::string who = "tensor '" + printableText(e.name) + "'";
    if (safetensorsCode(e.dtype).empty())
        return makeError(who + ": safetensors cannot store dtype " + std::string(torchName(e.dtype)));
    std::uint64_t bytes = dtypeSize(e.dtype);
    for (const auto dim : e.shape) {
        if (dim < 0)
            return makeError(who + ": shape " + formatShape(e.shape) + " has a negative dimension");
        const auto d = static_cast<std::uint64_t>(dim);
        if (d != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / d)
            return makeError(who + ": shape " + formatShape(e.shape) + " is too large");
        bytes *= d;
    }
    return bytes;
}

Status checkEntries(const std::vector<SafetensorsEntry>& entries, const std::map<std::string, std::string>& metadata)
{
    std::set<std::string_view> names;
    for (const auto& e : entries) {
        TESSERA_TRY(checkSafetensorsTensorName(e.name));
        if (!names.insert(e.name).second)
            return makeError("tensor '" + printableText(e.name) + "' appears twice; safetensors names must be unique");
    }
    for (const auto& [key, value] : metadata) {
        TESSERA_TRY(checkText(key, "metadata key '" + printableText(key) + "'"));
        TESSERA_TRY(checkText(value, "metadata value of '" + printableText(key) + "'"));
    }
    return {};
}

} // namespace

Status checkSafetensorsTensorName(const std::string& name)
{
    if (name == "__metadata__")
        return makeError("a tensor cannot be named __metadata__: safetensors reserves that key");
    return checkText(name, "tensor name '" + printableText(name) + "'");
}

Result<SafetensorsLayout> planSafetensorsFile(
    const std::vector<SafetensorsEntry>& entries, const std::map<std::string, std::string>& metadata)
{
    TESSERA_TRY(checkEntries(entries, metadata));
    SafetensorsLayout layout;
    layout.byteSizes.reserve(entries.size());
    for (const auto& e : entries) {
        auto bytes = entryBytes(e);
        TESSERA_TRY(bytes);
        layout.byteSizes.push_back(*bytes);
    }

    std::vector<std::size_t> order(entries.size());
    std::iota(order.begin(), order.end(), std::size_t { 0 });
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const int ra = dtypeRank(safetensorsCode(entries[a].dtype));
        const int rb = dtypeRank(safetensorsCode(entries[b].dtype));
        return ra != rb ? ra > rb : entries[a].name < entries[b].name; // byte-wise, like Rust's String order
    });

    std::vector<std::uint64_t> relOffsets(entries.size());
    std::uint64_t offset = 0;
    for (const std::size_t index : order) {
        relOffsets[index] = offset;
        if (layout.byteSizes[index] > std::numeric_limits<std::uint64_t>::max() - offset)
            return makeError("the tensors add up to more than 2^64 bytes");
        offset += layout.byteSizes[index];
    }

    std::string json = headerJson(entries, order, relOffsets, layout.byteSizes, metadata);
    json.resize((json.size() + 7) / 8 * 8, ' '); // N_LEN alignment: the data section starts 8-aligned
    if (json.size() > kSafetensorsMaxHeaderSize)
        return makeError("the header would be " + std::to_string(json.size())
            + " bytes, more than the 100,000,000 safetensors readers accept; split the tensors into more files");

    const std::uint64_t n = json.size();
    const std::uint64_t dataStart = 8 + n;
    if (offset > std::numeric_limits<std::uint64_t>::max() - dataStart)
        return makeError("the tensors add up to more than 2^64 bytes");
    layout.header.reserve(dataStart);
    for (int i = 0; i < 8; ++i)
        layout.header += static_cast<char>((n >> (8 * i)) & 0xFF);
    layout.header += json;
    layout.dataOffsets.reserve(entries.size());
    for (const auto rel : relOffsets)
        layout.dataOffsets.push_back(dataStart + rel);
    layout.fileSize = dataStart + offset;
    return layout;
}

std::vector<std::vector<std::size_t>> splitIntoShards(
    const std::vector<std::uint64_t>& sizes, std::uint64_t maxShardSize)
{
    std::vector<std::vector<std::size_t>> shards;
    std::vector<std::size_t> current;
    std::uint64_t currentSize = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] > maxShardSize) {
            shards.push_back({ i });
            continue;
        }
        if (!current.empty() && currentSize + sizes[i] > maxShardSize) {
            shards.push_back(std::move(current));
            current.clear();
            currentSize = 0;
        }
        current.push_back(i);
        currentSize += sizes[i];
    }
    if (!current.empty())
        shards.push_back(std::move(current));
    return shards;
}

std::string shardFileName(std::size_t index0, std::size_t count)
{
    if (count == 1)
        return "model.safetensors";
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "model-%05zu-of-%05zu.safetensors", index0 + 1, count);
    return buffer;
}

namespace {

/// Next code point of UTF-8 `text` at `i` (advancing it); invalid bytes read as U+FFFD.
std::uint32_t nextCodePoint(std::string_view text, std::size_t& i)
{
    const std::string_view rest = text.substr(i);
    const auto c = static_cast<unsigned char>(rest[0]);
    const std::size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (len > rest.size() || findInvalidUtf8(rest.substr(0, len)) != std::string_view::npos) {
        ++i;
        return c < 0x80 ? c : 0xFFFD;
    }
    i += len;
    if (len == 1)
        return c;
    std::uint32_t cp = c & (0x7F >> len);
    for (std::size_t k = 1; k < len; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(rest[k]) & 0x3F);
    return cp;
}

/// A JSON string as Python's json.dumps writes it with ensure_ascii=True.
void appendPythonString(std::string& out, std::string_view text)
{
    auto escape16 = [&out](std::uint32_t unit) {
        char buffer[16];
        std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(unit));
        out += buffer;
    };
    out += '"';
    for (std::size_t i = 0; i < text.size();) {
        const std::uint32_t cp = nextCodePoint(text, i);
        if (const char* escape = shortJsonEscape(cp)) {
            out += escape;
        } else if (cp >= 0x20 && cp < 0x7F) {
            out += static_cast<char>(cp);
        } else if (cp < 0x10000) {
            escape16(cp);
        } else { // UTF-16 surrogate pair, as Python does
            escape16(0xD800 + ((cp - 0x10000) >> 10));
            escape16(0xDC00 + ((cp - 0x10000) & 0x3FF));
        }
    }
    out += '"';
}

} // namespace

std::string makeShardIndexJson(
    std::uint64_t totalSize, const std::vector<std::pair<std::string, std::string>>& weightMap)
{
    std::map<std::string, std::string> sorted; // std::string order is code point order for UTF-8
    for (const auto& [tensor, file] : weightMap)
        sorted[tensor] = file;

    std::string out
        = "{\n  \"metadata\": {\n    \"total_size\": " + std::to_string(totalSize) + "\n  },\n  \"weight_map\": ";
    if (sorted.empty()) {
        out += "{}";
    } else {
        out += "{\n";
        bool first = true;
        for (const auto& [tensor, file] : sorted) {
            if (!first)
                out += ",\n";
            first = false;
            out += "    ";
            appendPythonString(out, tensor);
            out += ": ";
            appendPythonString(out, file);
        }
        out += "\n  }";
    }
    return out + "\n}\n";
}

namespace {

Status writeAll(int fd, const std::uint8_t* data, std::uint64_t size, const std::string& path)
{
    while (size > 0) {
        const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(size, 1u << 30));
        const ssize_t written = ::write(fd, data, chunk);
        if (written < 0 && errno == EINTR)
            continue;
        if (written <= 0)
            return makeError(path + ": cannot write: " + std::strerror(errno));
        data += written;
        size -= static_cast<std::uint64_t>(written);
    }
    return {};
}

Status writeBody(int fd, const std::string& path, const SafetensorsLayout& layout, const SafetensorsFill& fill,
    const std::vector<SafetensorsEntry>& entries)
{
    TESSERA_TRY(writeAll(fd, reinterpret_cast<const std::uint8_t*>(layout.header.data()), layout.header.size(), path));
    std::vector<std::size_t> order(layout.dataOffsets.size());
    std::iota(order.begin(), order.end(), std::size_t { 0 });
    std::sort(order.begin(), order.end(),
        [&](std::size_t a, std::size_t b) { return layout.dataOffsets[a] < layout.dataOffsets[b]; });
    std::vector<std::uint8_t> buffer;
    for (const std::size_t index : order) {
        const std::uint64_t bytes = layout.byteSizes[index];
        if (bytes > std::numeric_limits<std::size_t>::max())
            return makeError(path + ": tensor '" + printableText(entries[index].name)
                             + "' is too large to buffer in memory");
        buffer.assign(static_cast<std::size_t>(bytes), 0);
        const Status filled = fill(index, buffer.data(), bytes);
        if (!filled)
            return filled.error().withContext(path + ": tensor '" + entries[index].name + "'");
        TESSERA_TRY(writeAll(fd, buffer.data(), bytes, path));
    }
    return {};
}

} // namespace

Status writeSafetensorsFile(const std::string& path, const std::vector<SafetensorsEntry>& entries,
    const std::map<std::string, std::string>& metadata, const SafetensorsFill& fill)
{
    auto layout = planSafetensorsFile(entries, metadata);
    if (!layout)
        return layout.error().withContext(path);

    // A unique sibling name: rename() within one folder is atomic, and open() with 0666 honours the umask,
    // which mkstemp's 0600 would not.
    static std::atomic<unsigned> counter { 0 };
    const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return makeError(path + ": cannot create " + tmp + ": " + std::strerror(errno));

    Status status;
    try {
        status = writeBody(fd, path, *layout, fill, entries);
    } catch (const std::exception& ex) { // bad_alloc, or a callback that throws
        status = makeError(path + ": " + ex.what());
    }
    // On disk before the rename gives it its final name: otherwise a crash could leave an empty file there.
    if (status && ::fdatasync(fd) != 0)
        status = makeError(path + ": cannot be flushed to disk: " + std::strerror(errno));
    if (::close(fd) != 0 && status)
        status = makeError(path + ": cannot write: " + std::strerror(errno));
    if (status && ::rename(tmp.c_str(), path.c_str()) != 0)
        status = makeError(path + ": cannot rename " + tmp + " to it: " + std::strerror(errno));
    if (!status)
        ::unlink(tmp.c_str());
    return status;
}

} // namespace tessera
