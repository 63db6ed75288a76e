// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/safetensors_reader.h"
#include "io/printable.h"
#include "formats/mxfp4.h"
#include "io/regular_file.h"
#include "io/text_file.h"
#include "text_util.h"
#include "formats/layout_registry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace tessera {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------------------------

std::size_t findInvalidUtf8(std::string_view text)
{
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = 0;
        unsigned char lo = 0x80, hi = 0xBF; // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0; // no overlong 3-byte forms
            else if (c == 0xED)
                hi = 0x9F; // no UTF-16 surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90; // no overlong 4-byte forms
            else if (c == 0xF4)
                hi = 0x8F; // nothing above U+10FFFF
        } else {
            return i;
        }
        if (n - i < len || p[i + 1] < lo || p[i + 1] > hi)
            return i;
        for (std::size_t k = 2; k < len; ++k)
            if (p[i + k] < 0x80 || p[i + k] > 0xBF)
                return i;
        i += len;
    }
    return std::string_view::npos;
}

std::string formatShape(const Shape& shape)
{
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i)
            out += ',';
        out += std::to_string(shape[i]);
    }
    return out + "]";
}

namespace {

std::string formatDims(const std::vector<std::uint64_t>& dims)
{
    std::string out = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i)
            out += ',';
        out += std::to_string(dims[i]);
    }
    return out + "]";
}

std::string inQuotes(const std::string& name) { return "'" + printableText(name) + "'"; }

bool checkedMul(std::uint64_t a, std::uint64_t b, std::uint64_t& out)
{
    if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a)
        return false;
    out = a * b;
    return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Header JSON: a SAX handler specialised to the safetensors schema
// ---------------------------------------------------------------------------------------------------------------

/// One tensor entry as the JSON gives it, before validation.
struct RawEntry {
    std::string name;
    DType dtype = DType::Unknown;
    std::vector<std::uint64_t> shape;
    std::vector<std::uint64_t> offsets;
    bool hasDtype = false;
    bool hasShape = false;
    bool hasOffsets = false;
};

using Json = nlohmann::json;

/// Streams the header through nlohmann's SAX parser instead of building a DOM: it stops at the first
/// problem, keeps memory proportional to the tensors (a 100 MB header of nested brackets cannot blow up),
/// and sees duplicate keys, which a DOM silently merges.
class HeaderSax final : public nlohmann::json_sax<Json> {
public:
    std::vector<RawEntry> entries;
    std::map<std::string, std::string> metadata;
    std::string error;

    bool null() override
    {
        if (m_state == State::RootValue && m_key == kMetadataKey) {
            m_state = State::Root; // serde reads `"__metadata__": null` as "no metadata"
            return true;
        }
        return scalar("null");
    }
    bool boolean(bool) override { return scalar("a boolean"); }
    bool number_integer(number_integer_t) override { return scalar("a negative number"); }
    bool number_float(number_float_t, const string_t&) override
    {
        return scalar("a number that is not a whole number (or is too large)");
    }
    bool binary(binary_t&) override { return scalar("binary data"); }

    bool number_unsigned(number_unsigned_t value) override
    {
        if (m_state == State::Shape) {
            current().shape.push_back(value);
            return true;
        }
        if (m_state == State::Offsets) {
            if (current().offsets.size() == 2)
                return fail(
                    tensorContext() + "data_offsets must be a list of two numbers [begin, end], but it has more");
            current().offsets.push_back(value);
            return true;
        }
        return scalar("a number");
    }

    bool string(string_t& value) override
    {
        if (m_state == State::MetadataValue) {
            metadata[m_metaKey] = value;
            m_state = State::Metadata;
            return true;
        }
        if (m_state == State::TensorValue && m_field == Field::Dtype)
            return setDtype(value);
        return scalar("a string");
    }

    bool start_object(std::size_t) override
    {
        switch (m_state) {
        case State::Start:
            m_state = State::Root;
            return true;
        case State::RootValue:
            if (m_key == kMetadataKey) {
                m_state = State::Metadata;
            } else {
                entries.push_back(RawEntry { m_key, DType::Unknown, {}, {}, false, false, false });
                m_fieldsSeen.clear();
                m_state = State::Tensor;
            }
            return true;
        default:
            return nested("an object");
        }
    }

    bool key(string_t& value) override
    {
        switch (m_state) {
        case State::Root:
            if (!m_rootKeys.insert(value).second)
                return fail(
                    "the key " + inQuotes(value) + " appears twice in the header (duplicate keys are not allowed)");
            m_key = value;
            m_state = State::RootValue;
            return true;
        case State::Metadata:
            if (metadata.count(value))
                return fail("__metadata__ has the key " + inQuotes(value) + " twice (duplicate keys are not allowed)");
            m_metaKey = value;
            m_state = State::MetadataValue;
            return true;
        case State::Tensor:
            if (!m_fieldsSeen.insert(value).second)
                return fail(tensorContext() + "the field " + inQuotes(value) + " appears twice");
            m_field = value == "dtype"    ? Field::Dtype
                : value == "shape"        ? Field::Shape
                : value == "data_offsets" ? Field::Offsets
                                          : Field::Other;
            m_state = State::TensorValue;
            return true;
        default:
            return true; // keys inside a skipped value
        }
    }

    bool end_object() override
    {
        switch (m_state) {
        case State::Root:
            m_state = State::Done;
            return true;
        case State::Metadata:
            m_state = State::Root;
            return true;
        case State::Tensor:
            return finishTensor();
        default:
            return endSkipped();
        }
    }

    bool start_array(std::size_t) override
    {
        if (m_state == State::TensorValue && m_field == Field::Shape) {
            current().hasShape = true;
            m_state = State::Shape;
            return true;
        }
        if (m_state == State::TensorValue && m_field == Field::Offsets) {
            current().hasOffsets = true;
            m_state = State::Offsets;
            return true;
        }
        return nested("a list");
    }

    bool end_array() override
    {
        if (m_state == State::Shape) {
            m_state = State::Tensor;
            return true;
        }
        if (m_state == State::Offsets) {
            if (current().offsets.size() != 2)
                return fail(tensorContext() + "data_offsets must be a list of two numbers [begin, end], but it has "
                    + std::to_string(current().offsets.size()));
            m_state = State::Tensor;
            return true;
        }
        return endSkipped();
    }

    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override
    {
        std::string what = ex.what();
        // nlohmann prefixes "[json.exception.parse_error.101] ", which means nothing to a user.
        if (const auto pos = what.find("] "); what.rfind("[json.exception", 0) == 0 && pos != std::string::npos)
            what.erase(0, pos + 2);
        return fail("the header is not valid JSON: " + what);
    }

private:
    static constexpr const char* kMetadataKey = "__metadata__";
    enum class State {
        Start,
        Root,
        RootValue,
        Metadata,
        MetadataValue,
        Tensor,
        TensorValue,
        Shape,
        Offsets,
        Skip,
        Done
    };
    enum class Field { Dtype, Shape, Offsets, Other };

    State m_state = State::Start;
    Field m_field = Field::Other;
    std::string m_key;
    std::string m_metaKey;
    std::unordered_set<std::string> m_rootKeys;
    std::set<std::string> m_fieldsSeen;
    int m_skipDepth = 0;

    RawEntry& current() { return entries.back(); }
    std::string tensorContext() const { return "tensor " + inQuotes(entries.back().name) + ": "; }

    bool fail(std::string message)
    {
        if (error.empty())
            error = std::move(message);
        return false;
    }

    /// A scalar where the schema wants something else, or the whole value of an ignored field.
    bool scalar(const std::string& what)
    {
        if (m_state == State::Skip)
            return true;
        if (m_state == State::TensorValue && m_field == Field::Other) {
            m_state = State::Tensor;
            return true;
        }
        return unexpected(what);
    }

    /// An object or list where the schema wants something else, or the start of an ignored field's value.
    bool nested(const std::string& what)
    {
        if (m_state == State::Skip) {
            ++m_skipDepth;
            return true;
        }
        if (m_state == State::TensorValue && m_field == Field::Other) {
            // serde ignores fields of a tensor entry it does not know; so do we.
            m_state = State::Skip;
            m_skipDepth = 1;
            return true;
        }
        return unexpected(what);
    }

    bool endSkipped()
    {
        if (m_state == State::Skip && --m_skipDepth == 0)
            m_state = State::Tensor;
        return true;
    }

    bool unexpected(const std::string& what)
    {
        switch (m_state) {
        case State::Start:
            return fail("the header must be a JSON object, but it is " + what);
        case State::RootValue:
            if (m_key == kMetadataKey)
                return fail("__metadata__ must be an object mapping strings to strings, but it is " + what);
            return fail("the entry for tensor " + inQuotes(m_key)
                + " must be an object with dtype, shape and data_offsets, but it is " + what);
        case State::MetadataValue:
            return fail("__metadata__ value of " + inQuotes(m_metaKey)
                + " must be a string (safetensors metadata maps strings to strings only), but it is " + what);
        case State::TensorValue:
            if (m_field == Field::Dtype)
                return fail(tensorContext() + "dtype must be a string such as \"BF16\", but it is " + what);
            if (m_field == Field::Shape)
                return fail(tensorContext() + "shape must be a list of non-negative whole numbers, but it is " + what);
            return fail(tensorContext() + "data_offsets must be a list of two numbers [begin, end], but it is " + what);
        case State::Shape:
            return fail(
                tensorContext() + "shape must be a list of non-negative whole numbers, but it contains " + what);
        case State::Offsets:
            return fail(
                tensorContext() + "data_offsets must be two non-negative whole numbers, but it contains " + what);
        default:
            return fail("the header has " + what + " where it is not expected");
        }
    }

    bool setDtype(const std::string& code)
    {
        current().hasDtype = true;
        m_state = State::Tensor;
        if (const auto dtype = dtypeFromSafetensorsCode(code)) {
            current().dtype = *dtype;
            return true;
        }
        if (code == "F4" || code == "F6_E2M3" || code == "F6_E3M2")
            return fail(tensorContext() + "dtype \"" + code
                + "\" (a packed sub-byte float) is valid safetensors but Tessera cannot handle it yet");
        return fail(tensorContext() + "unknown dtype \"" + code + "\"");
    }

    bool finishTensor()
    {
        const RawEntry& e = current();
        if (!e.hasDtype)
            return fail(tensorContext() + "the entry has no dtype");
        if (!e.hasShape)
            return fail(tensorContext() + "the entry has no shape");
        if (!e.hasOffsets)
            return fail(tensorContext() + "the entry has no data_offsets");
        m_state = State::Root;
        return true;
    }
};

// ---------------------------------------------------------------------------------------------------------------
// Validation of offsets and sizes (Metadata::validate)
// ---------------------------------------------------------------------------------------------------------------

std::string offsetError(const RawEntry& e, const RawEntry* prev, std::uint64_t start)
{
    const std::uint64_t s = e.offsets[0];
    const std::uint64_t end = e.offsets[1];
    const std::string range = "[" + std::to_string(s) + ", " + std::to_string(end) + ")";
    if (s == start) // so end < begin
        return "tensor " + inQuotes(e.name) + " has data_offsets [" + std::to_string(s) + ", " + std::to_string(end)
            + "] whose end lies before its begin";
    if (!prev)
        return "tensor " + inQuotes(e.name) + " is the first in the data but starts at byte " + std::to_string(s)
            + " instead of 0: the bytes before it belong to no tensor";
    const std::string prevRange = "[" + std::to_string(prev->offsets[0]) + ", " + std::to_string(start) + ")";
    if (s > start)
        return "there is a gap of " + std::to_string(s - start) + " bytes between tensor " + inQuotes(prev->name) + " "
            + prevRange + " and tensor " + inQuotes(e.name) + " " + range + " (safetensors data must be contiguous)";
    return "tensor " + inQuotes(e.name) + " claims bytes " + range + ", which overlap tensor " + inQuotes(prev->name)
        + " " + prevRange;
}

/// Checks the entries in data order, like the reference; returns the end of the data section or a message.
Result<std::uint64_t> validateEntries(const std::vector<RawEntry>& entries)
{
    std::vector<std::size_t> order(entries.size());
    std::iota(order.begin(), order.end(), std::size_t { 0 });
    std::stable_sort(order.begin(), order.end(),
        [&](std::size_t a, std::size_t b) { return entries[a].offsets < entries[b].offsets; });

    std::uint64_t start = 0;
    const RawEntry* prev = nullptr;
    for (const std::size_t index : order) {
        const RawEntry& e = entries[index];
        const std::uint64_t s = e.offsets[0];
        const std::uint64_t end = e.offsets[1];
        if (s != start || end < s)
            return makeError(offsetError(e, prev, start));
        start = end;
        prev = &e;

        std::uint64_t numel = 1;
        std::uint64_t nbits = 0;
        bool fits = true;
        for (const auto dim : e.shape) // left to right, like try_fold(checked_mul)
            fits = fits && checkedMul(numel, dim, numel);
        fits = fits && checkedMul(numel, dtypeSize(e.dtype) * 8, nbits);
        const std::string what = "shape " + formatDims(e.shape) + " of " + std::string(safetensorsCode(e.dtype));
        if (!fits)
            return makeError("tensor " + inQuotes(e.name) + ": " + what
                + " is too large (its size in bytes does not fit in 64 bits)");
        if (end - s != nbits / 8)
            return makeError("tensor " + inQuotes(e.name) + " claims bytes [" + std::to_string(s) + ", "
                + std::to_string(end) + ") but its " + what + " needs " + std::to_string(nbits / 8) + " bytes");
    }
    return start;
}

Result<Shape> toShape(const RawEntry& e)
{
    Shape shape;
    shape.reserve(e.shape.size());
    // The byte check passes any shape with a 0 in it; the other dimensions' product must still fit, as Shape is
    // signed like torch's sizes and strides are products over part of the shape.
    std::uint64_t nonZero = 1;
    for (const auto dim : e.shape) {
        if (dim != 0 && (!checkedMul(nonZero, dim, nonZero)
                         || nonZero > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())))
            return makeError("tensor " + inQuotes(e.name) + ": dimension " + std::to_string(dim) + " is too large");
        shape.push_back(static_cast<std::int64_t>(dim));
    }
    return shape;
}

Result<SafetensorsHeader> parseHeader(const ByteView& bytes)
{
    const std::uint64_t size = bytes.size();
    if (size == 0)
        return makeError("the file is empty, so it is not a safetensors file");
    if (size < 8)
        return makeError("the file is only " + std::to_string(size)
            + " bytes long, too short for a safetensors file (it must start with an 8-byte header length)");
    const std::uint64_t n = bytes.u64(0);
    if (n > kSafetensorsMaxHeaderSize)
        return makeError("the first 8 bytes give a header length of " + std::to_string(n)
            + " bytes, more than the 100,000,000 safetensors allows; this is not a safetensors file or it is corrupt");
    if (!bytes.contains(8, n))
        return makeError("the header is said to be " + std::to_string(n) + " bytes long, but the file has only "
            + std::to_string(size - 8) + " bytes after the 8-byte length (truncated or not a safetensors file)");

    const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<std::size_t>(n));
    if (const auto bad = findInvalidUtf8(text); bad != std::string_view::npos)
        return makeError("the header is not valid UTF-8 text (bad byte at header offset " + std::to_string(bad) + ")");

    HeaderSax sax;
    bool parsed = false;
    try {
        parsed = Json::sax_parse(text, &sax);
    } catch (const std::exception& ex) { // only bad_alloc is expected here
        return makeError(std::string("cannot parse the header: ") + ex.what());
    }
    if (!parsed)
        return makeError(sax.error.empty() ? std::string("the header is not valid JSON") : sax.error);

    auto dataEnd = validateEntries(sax.entries);
    TESSERA_TRY(dataEnd);
    const std::uint64_t dataStart = 8 + n;
    const std::uint64_t available = size - dataStart;
    if (*dataEnd > available)
        return makeError("the file is truncated: its tensors need " + std::to_string(*dataEnd)
            + " bytes of data after the header, but only " + std::to_string(available) + " are there");
    if (*dataEnd < available)
        return makeError("the file has " + std::to_string(available - *dataEnd)
            + " unexpected bytes after the last tensor (a safetensors file must end where its last tensor ends)");

    SafetensorsHeader header;
    header.metadata = std::move(sax.metadata);
    header.dataStart = dataStart;
    header.headerLength = n;
    header.tensors.reserve(sax.entries.size());
    for (const RawEntry& e : sax.entries) {
        auto shape = toShape(e);
        TESSERA_TRY(shape);
        header.tensors.push_back(SafetensorsTensor {
            e.name, e.dtype, std::move(*shape), dataStart + e.offsets[0], dataStart + e.offsets[1] });
    }
    return header;
}

} // namespace

Result<SafetensorsHeader> readSafetensorsHeader(const ByteView& bytes, const std::string& path)
{
    auto header = parseHeader(bytes);
    if (!header)
        return header.error().withContext(path);
    header->path = path;
    return header;
}

Result<SafetensorsHeader> readSafetensorsFile(const std::string& path)
{
    auto file = MappedFile::open(path);
    TESSERA_TRY(file);
    return readSafetensorsHeader((*file)->view(), path);
}

// ---------------------------------------------------------------------------------------------------------------
// Hugging Face folders
// ---------------------------------------------------------------------------------------------------------------

namespace {

constexpr const char* kSingleName = "model.safetensors";
constexpr const char* kIndexName = "model.safetensors.index.json";

bool isFile(const fs::path& path)
{
    std::error_code ec;
    return fs::is_regular_file(path, ec);
}

/// Row-major strides; a zero-sized dim counts as 1 like torch's contiguous strides.
Shape contiguousStrides(const Shape& shape)
{
    Shape strides(shape.size(), 1);
    std::uint64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i]
            = static_cast<std::int64_t>(std::min<std::uint64_t>(stride, std::numeric_limits<std::int64_t>::max()));
        const std::uint64_t dim = static_cast<std::uint64_t>(std::max<std::int64_t>(shape[i], 1));
        if (!checkedMul(stride, dim, stride))
            stride = std::numeric_limits<std::uint64_t>::max();
    }
    return strides;
}

TensorInfo toTensorInfo(const SafetensorsTensor& t, const std::string& file)
{
    Piece piece;
    piece.file = file;
    piece.offsets.assign(t.shape.size(), 0);
    piece.shape = t.shape;
    piece.strides = contiguousStrides(t.shape);
    piece.storedDtype = t.dtype;
    piece.dataOffset = t.begin;
    piece.storageBegin = t.begin;
    piece.storageBytes = t.end - t.begin;

    TensorInfo info;
    info.name = t.name;
    info.dtype = t.dtype;
    info.shape = t.shape;
    info.pieces.push_back(std::move(piece));
    return info;
}

/// Tensors of a header in data order (the order the bytes lie in the file).
std::vector<const SafetensorsTensor*> inDataOrder(const SafetensorsHeader& header)
{
    std::vector<const SafetensorsTensor*> out;
    for (const auto& t : header.tensors)
        out.push_back(&t);
    std::stable_sort(out.begin(), out.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
        return std::make_pair(a->begin, a->end) < std::make_pair(b->begin, b->end);
    });
    return out;
}

CheckpointInfo emptyInfo(const fs::path& folder)
{
    CheckpointInfo info;
    info.layout = layout_names::kHfSafetensors;
    info.root = folder.string();
    info.parallel.worldSize = 1;
    if (isFile(folder / "config.json"))
        info.hfConfigDir = folder.string();
    return info;
}

void noteMetadata(CheckpointInfo& info, const SafetensorsHeader& header)
{
    for (const auto& [key, value] : header.metadata)
        info.notes.emplace("metadata." + key, value);
}

/// Drops a leading "path: " that readSafetensorsFile() put there, since Problem carries the file itself.
std::string withoutPath(const std::string& message, const std::string& path)
{
    const std::string prefix = path + ": ";
    return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

Result<CheckpointInfo> scanSingle(const fs::path& folder, const fs::path& file)
{
    auto header = readSafetensorsFile(file.string());
    TESSERA_TRY(header);
    CheckpointInfo info = emptyInfo(folder);
    info.files.push_back(file.string());
    for (const auto* t : inDataOrder(*header))
        info.tensors.push_back(toTensorInfo(*t, file.string()));
    noteMetadata(info, *header);
    return info;
}

struct WeightMap {
    std::vector<std::pair<std::string, std::string>> entries; ///< tensor → file, in the index's order
    std::unordered_map<std::string, std::string> fileOf;
    std::optional<std::uint64_t> totalSize;
};

Result<WeightMap> readWeightMap(const fs::path& indexPath)
{
    const std::string path = indexPath.string();
    const auto text = readTextFile(path);
    if (!text)
        return makeError(text.error().message + " (the index file)");
    const Json json = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded())
        return makeError(path + ": the index is not valid JSON");
    if (!json.is_object() || !json.contains("weight_map") || !json["weight_map"].is_object())
        return makeError(path + ": the index has no \"weight_map\" object mapping tensor names to files");

    WeightMap map;
    for (const auto& [tensor, file] : json["weight_map"].items()) {
        if (!file.is_string())
            return makeError(path + ": weight_map entry " + inQuotes(tensor) + " is not a file name");
        map.entries.emplace_back(tensor, file.get<std::string>());
        map.fileOf[tensor] = file.get<std::string>();
    }
    if (const auto meta = json.find("metadata"); meta != json.end() && meta->is_object()) {
        if (const auto total = meta->find("total_size"); total != meta->end() && total->is_number_unsigned())
            map.totalSize = total->get<std::uint64_t>();
    }
    return map;
}

/// weight_map values must name files in the folder itself, never elsewhere.
bool isPlainFileName(const std::string& name)
{
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos
        && name.find('\\') == std::string::npos;
}

std::vector<fs::path> safetensorsFilesIn(const fs::path& folder)
{
    std::vector<fs::path> files;
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
        if (endsWith(it->path().filename().string(), ".safetensors") && isFile(it->path()))
            files.push_back(it->path());
    std::sort(files.begin(), files.end());
    return files;
}

Result<CheckpointInfo> scanIndexed(const fs::path& folder, const fs::path& indexPath)
{
    auto map = readWeightMap(indexPath);
    TESSERA_TRY(map);
    CheckpointInfo info = emptyInfo(folder);
    const std::string indexName = indexPath.filename().string();
    if (map->totalSize)
        info.notes["index_total_size"] = std::to_string(*map->totalSize);

    std::map<std::string, std::size_t> countPerFile; // sorted: shard names sort in shard order
    for (const auto& [tensor, file] : map->entries)
        ++countPerFile[file];

    std::unordered_map<std::string, std::string> foundIn; // tensor → shard file name
    std::set<std::string> readFiles;
    for (const auto& [fileName, count] : countPerFile) {
        const std::string path = (folder / fileName).string();
        if (!isPlainFileName(fileName)) {
            info.problems.push_back({ indexPath.string(), "",
                "weight_map names " + inQuotes(fileName) + ", which is not a file in this folder" });
            continue;
        }
        if (!isFile(folder / fileName)) {
            const std::string kind = describeFileKind(path);
            info.problems.push_back({ path, "",
                "listed in " + indexName + " for " + std::to_string(count) + " tensors, but "
                    + (kind == "missing" ? std::string("the file does not exist") : "it is " + kind
                                                                                       + ", not a regular file") });
            continue;
        }
        auto header = readSafetensorsFile(path);
        if (!header) {
            info.problems.push_back({ path, "", withoutPath(header.error().message, path) });
            continue;
        }
        readFiles.insert(fileName);
        info.files.push_back(path);
        if (info.files.size() == 1)
            noteMetadata(info, *header);
        for (const auto* t : inDataOrder(*header)) {
            if (const auto seen = foundIn.find(t->name); seen != foundIn.end()) {
                info.problems.push_back(
                    { path, t->name, "is also stored in " + seen->second + "; the copy there is used" });
                continue;
            }
            foundIn.emplace(t->name, fileName);
            const auto listed = map->fileOf.find(t->name);
            if (listed == map->fileOf.end())
                info.problems.push_back({ path, t->name, "is in this file but not listed in " + indexName });
            else if (listed->second != fileName)
                info.problems.push_back({ path, t->name, indexName + " says it is in " + listed->second });
            info.tensors.push_back(toTensorInfo(*t, path));
        }
    }

    for (const auto& stray : safetensorsFilesIn(folder)) {
        // A model shard the index does not mention is ignored by transformers too, which is worth saying;
        // other safetensors files (an adapter, say) may share the folder legitimately.
        const std::string name = stray.filename().string();
        if (!countPerFile.count(name) && name.rfind("model", 0) == 0)
            info.problems.push_back(
                { stray.string(), "", "not listed in " + indexName + ", so its tensors are ignored" });
    }

    for (const auto& [tensor, fileName] : map->entries) {
        // Tensors found elsewhere were reported as misplaced; unreadable files were reported as a whole.
        if (!readFiles.count(fileName) || foundIn.count(tensor))
            continue;
        info.problems.push_back({ (folder / fileName).string(), tensor,
            "is listed in " + indexName + " for this file, but the file does not contain it" });
    }
    return info;
}

Result<CheckpointInfo> scanAsStored(const std::string& dirOrFile)
{
    std::error_code ec;
    const fs::path given = fs::absolute(fs::path(dirOrFile), ec).lexically_normal();
    if (ec)
        return makeError(dirOrFile + ": " + ec.message());
    const auto status = fs::status(given, ec);
    if (ec || !fs::exists(status))
        return makeError(dirOrFile + ": no such file or folder");

    if (fs::is_regular_file(status)) {
        const fs::path folder = given.parent_path();
        if (endsWith(given.filename().string(), ".safetensors.index.json"))
            return scanIndexed(folder, given);
        return scanSingle(folder, given);
    }
    if (!fs::is_directory(status))
        return makeError(dirOrFile + ": neither a file nor a folder");

    if (isFile(given / kSingleName)) {
        // transformers loads model.safetensors before looking for an index; so do we.
        auto info = scanSingle(given, given / kSingleName);
        if (info && isFile(given / kIndexName))
            info->notes["ignored"] = std::string(kIndexName) + " (model.safetensors takes precedence)";
        return info;
    }
    if (isFile(given / kIndexName))
        return scanIndexed(given, given / kIndexName);
    // The model file or the index under its name but a FIFO, device or folder: name it, do not call it absent.
    for (const char* name : { kSingleName, kIndexName }) {
        const fs::path p = given / name;
        if (fs::exists(fs::symlink_status(p, ec)))
            return makeError(p.string() + ": is " + describeFileKind(p.string()) + ", not a regular file");
    }

    const auto files = safetensorsFilesIn(given);
    if (files.size() == 1)
        return scanSingle(given, files.front());
    if (files.empty())
        return makeError(given.string() + ": no .safetensors file in this folder");
    std::string names;
    for (std::size_t i = 0; i < files.size() && i < 3; ++i)
        names += (i ? ", " : "") + files[i].filename().string();
    return makeError(given.string() + ": " + std::to_string(files.size()) + " .safetensors files (" + names
        + (files.size() > 3 ? ", …" : "") + ") but no " + kIndexName + " saying how they form one model");
}

} // namespace

Result<CheckpointInfo> scanSafetensorsFolder(const std::string& dirOrFile)
{
    auto info = scanAsStored(dirOrFile);
    if (info)
        joinMxfp4Pairs(*info); // GPT-OSS's experts as transformers loads them
    return info;
}

} // namespace tessera
