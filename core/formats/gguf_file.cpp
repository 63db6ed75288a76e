// SPDX-License-Identifier: GPL-3.0-or-later
#include "formats/gguf_file.h"
#include "io/printable.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

namespace tessera {

GgufValue GgufValue::u32(std::uint32_t v) { return { GgufValueType::UInt32, GgufValueType::UInt32, std::uint64_t(v) }; }
GgufValue GgufValue::u64(std::uint64_t v) { return { GgufValueType::UInt64, GgufValueType::UInt32, v }; }
GgufValue GgufValue::i32(std::int32_t v) { return { GgufValueType::Int32, GgufValueType::UInt32, std::int64_t(v) }; }
GgufValue GgufValue::f32(float v) { return { GgufValueType::Float32, GgufValueType::UInt32, double(v) }; }
GgufValue GgufValue::boolean(bool v) { return { GgufValueType::Bool, GgufValueType::UInt32, v }; }
GgufValue GgufValue::string(std::string v) { return { GgufValueType::String, GgufValueType::UInt32, std::move(v) }; }
GgufValue GgufValue::strings(std::vector<std::string> v)
{
    return { GgufValueType::Array, GgufValueType::String, std::move(v) };
}
GgufValue GgufValue::f32s(std::vector<double> v) { return { GgufValueType::Array, GgufValueType::Float32, std::move(v) }; }
GgufValue GgufValue::i32s(std::vector<std::int64_t> v)
{
    return { GgufValueType::Array, GgufValueType::Int32, std::move(v) };
}

std::optional<std::int64_t> GgufValue::asInt() const
{
    if (const auto* u = std::get_if<std::uint64_t>(&data))
        return static_cast<std::int64_t>(*u);
    if (const auto* i = std::get_if<std::int64_t>(&data))
        return *i;
    if (const auto* b = std::get_if<bool>(&data))
        return *b ? 1 : 0;
    return std::nullopt;
}

std::optional<double> GgufValue::asFloat() const
{
    if (const auto* d = std::get_if<double>(&data))
        return *d;
    if (auto i = asInt())
        return static_cast<double>(*i);
    return std::nullopt;
}

std::string GgufValue::summary(std::size_t maxChars) const
{
    std::ostringstream out;
    auto clip = [&](std::string s) {
        if (s.size() > maxChars)
            s = s.substr(0, maxChars) + "…";
        return s;
    };
    auto list = [&](const auto& values, auto print) {
        out << "[" << values.size() << " " << (elementType == GgufValueType::String ? "strings" : "values") << ": ";
        std::size_t shown = 0;
        for (const auto& v : values) {
            if (out.tellp() > static_cast<std::streamoff>(maxChars)) {
                out << ", …";
                break;
            }
            out << (shown++ ? ", " : "");
            print(v);
        }
        out << "]";
    };
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>)
                out << clip(v);
            else if constexpr (std::is_same_v<T, bool>)
                out << (v ? "true" : "false");
            else if constexpr (std::is_same_v<T, std::vector<std::string>>)
                list(v, [&](const std::string& s) { out << "\"" << clip(s) << "\""; });
            else if constexpr (std::is_same_v<T, std::vector<bool>>)
                list(v, [&](bool b) { out << (b ? "true" : "false"); });
            else if constexpr (std::is_same_v<T, std::vector<std::uint64_t>> || std::is_same_v<T, std::vector<std::int64_t>>
                               || std::is_same_v<T, std::vector<double>>)
                list(v, [&](auto x) { out << x; });
            else
                out << v;
        },
        data);
    return out.str();
}

// ---------------------------------------------------------------------------------------------------------------
// Writing

namespace {

class Writer {
public:
    std::string bytes;
    template <typename T>
    void raw(T v)
    {
        char b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T)); // little-endian hosts only (x86-64, aarch64)
        bytes.append(b, sizeof(T));
    }
    void str(const std::string& s)
    {
        raw<std::uint64_t>(s.size());
        bytes += s;
    }
    void scalar(GgufValueType type, const GgufValue& value, std::size_t index = SIZE_MAX)
    {
        auto integer = [&]() -> std::uint64_t {
            if (index == SIZE_MAX) {
                if (auto i = value.asInt())
                    return static_cast<std::uint64_t>(*i);
                return 0;
            }
            if (const auto* u = std::get_if<std::vector<std::uint64_t>>(&value.data))
                return (*u)[index];
            if (const auto* i = std::get_if<std::vector<std::int64_t>>(&value.data))
                return static_cast<std::uint64_t>((*i)[index]);
            return 0;
        };
        auto real = [&]() -> double {
            if (index == SIZE_MAX)
                return value.asFloat().value_or(0);
            return std::get<std::vector<double>>(value.data)[index];
        };
        switch (type) {
        case GgufValueType::UInt8:
        case GgufValueType::Int8:
            raw<std::uint8_t>(static_cast<std::uint8_t>(integer()));
            break;
        case GgufValueType::UInt16:
        case GgufValueType::Int16:
            raw<std::uint16_t>(static_cast<std::uint16_t>(integer()));
            break;
        case GgufValueType::UInt32:
        case GgufValueType::Int32:
            raw<std::uint32_t>(static_cast<std::uint32_t>(integer()));
            break;
        case GgufValueType::UInt64:
        case GgufValueType::Int64:
            raw<std::uint64_t>(integer());
            break;
        case GgufValueType::Float32:
            raw<float>(static_cast<float>(real()));
            break;
        case GgufValueType::Float64:
            raw<double>(real());
            break;
        case GgufValueType::Bool:
            raw<std::uint8_t>(index == SIZE_MAX ? (std::get<bool>(value.data) ? 1 : 0)
                                                : (std::get<std::vector<bool>>(value.data)[index] ? 1 : 0));
            break;
        case GgufValueType::String:
            str(index == SIZE_MAX ? std::get<std::string>(value.data) : std::get<std::vector<std::string>>(value.data)[index]);
            break;
        case GgufValueType::Array:
            break;
        }
    }
};

std::size_t arraySize(const GgufValue& v)
{
    return std::visit(
        [](const auto& x) -> std::size_t {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::vector<std::uint64_t>> || std::is_same_v<T, std::vector<std::int64_t>>
                          || std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<std::string>>
                          || std::is_same_v<T, std::vector<bool>>)
                return x.size();
            else
                return 0;
        },
        v.data);
}

std::uint64_t alignUp(std::uint64_t n, std::uint64_t a) { return (n + a - 1) / a * a; }

} // namespace

Result<GgufLayout> layoutGgufFile(const std::vector<GgufKeyValue>& metadata, std::vector<GgufTensorInfo>& tensors)
{
    Writer w;
    w.bytes.append("GGUF", 4);
    w.raw<std::uint32_t>(kGgufVersion);
    w.raw<std::uint64_t>(tensors.size());
    w.raw<std::uint64_t>(metadata.size());
    std::set<std::string> keys;
    for (const auto& kv : metadata) {
        if (!keys.insert(kv.key).second)
            return makeError("GGUF metadata key " + printableText(kv.key) + " is given twice");
        w.str(kv.key);
        w.raw<std::uint32_t>(static_cast<std::uint32_t>(kv.value.type));
        if (kv.value.type == GgufValueType::Array) {
            const std::size_t n = arraySize(kv.value);
            w.raw<std::uint32_t>(static_cast<std::uint32_t>(kv.value.elementType));
            w.raw<std::uint64_t>(n);
            for (std::size_t i = 0; i < n; ++i)
                w.scalar(kv.value.elementType, kv.value, i);
        } else {
            w.scalar(kv.value.type, kv.value);
        }
    }
    std::set<std::string> names;
    std::uint64_t offset = 0;
    for (auto& t : tensors) {
        if (!names.insert(t.name).second)
            return makeError("GGUF tensor " + printableText(t.name) + " is given twice");
        if (t.name.size() >= 64)
            return makeError("GGUF tensor name " + printableText(t.name)
                             + " is longer than llama.cpp's 63 characters");
        const auto [block, blockBytes] = ggmlBlock(t.type);
        if (block == 0)
            return makeError(printableText(t.name) + ": ggml type " + std::to_string(t.type) + " cannot be written");
        std::uint64_t elements = 1;
        for (auto d : t.dims)
            elements *= d;
        if (!t.dims.empty() && t.dims[0] % block != 0)
            return makeError(printableText(t.name) + ": rows of " + std::to_string(t.dims[0])
                             + " elements are not a multiple of " + ggmlTypeName(t.type) + "'s block of "
                             + std::to_string(block));
        t.bytes = elements / block * blockBytes;
        t.offset = offset;
        offset = alignUp(offset + t.bytes, kGgufAlignment);
        w.str(t.name);
        w.raw<std::uint32_t>(static_cast<std::uint32_t>(t.dims.size()));
        for (auto d : t.dims)
            w.raw<std::uint64_t>(d);
        w.raw<std::uint32_t>(t.type);
        w.raw<std::uint64_t>(t.offset);
    }
    GgufLayout layout;
    layout.dataStart = alignUp(w.bytes.size(), kGgufAlignment);
    w.bytes.resize(layout.dataStart, '\0');
    layout.header = std::move(w.bytes);
    for (const auto& t : tensors)
        layout.fileOffsets.push_back(layout.dataStart + t.offset);
    layout.fileSize = layout.dataStart + offset;
    return layout;
}

// ---------------------------------------------------------------------------------------------------------------
// Reading

namespace {

class Reader {
public:
    explicit Reader(const ByteView& v) : m_view(v) { }
    std::uint64_t pos = 0;
    Status need(std::uint64_t n, const char* what)
    {
        if (!m_view.contains(pos, n))
            return makeError(std::string("the header ends inside ") + what + " at byte " + std::to_string(pos)
                             + " (truncated or not a GGUF file?)");
        return Status::success();
    }
    template <typename T>
    Result<T> raw(const char* what)
    {
        TESSERA_TRY(need(sizeof(T), what));
        T v;
        std::memcpy(&v, m_view.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    Result<std::string> str(const char* what)
    {
        auto n = raw<std::uint64_t>(what);
        TESSERA_TRY(n);
        TESSERA_TRY(need(*n, what));
        std::string s(reinterpret_cast<const char*>(m_view.data() + pos), static_cast<std::size_t>(*n));
        pos += *n;
        return s;
    }
    std::uint64_t remaining() const { return m_view.size() - pos; }

private:
    ByteView m_view;
};

std::uint64_t scalarSize(GgufValueType t)
{
    switch (t) {
    case GgufValueType::UInt8:
    case GgufValueType::Int8:
    case GgufValueType::Bool:
        return 1;
    case GgufValueType::UInt16:
    case GgufValueType::Int16:
        return 2;
    case GgufValueType::UInt32:
    case GgufValueType::Int32:
    case GgufValueType::Float32:
        return 4;
    case GgufValueType::UInt64:
    case GgufValueType::Int64:
    case GgufValueType::Float64:
        return 8;
    case GgufValueType::String:
        return 8; // at least its length
    case GgufValueType::Array:
        return 12;
    }
    return 0;
}

bool isSigned(GgufValueType t)
{
    return t == GgufValueType::Int8 || t == GgufValueType::Int16 || t == GgufValueType::Int32 || t == GgufValueType::Int64;
}

using Scalar = std::variant<std::uint64_t, std::int64_t, double, bool, std::string>;

/// One scalar of type `t`: integers as uint64/int64, floats as double.
Result<Scalar> readScalar(Reader& r, GgufValueType t)
{
    switch (t) {
    case GgufValueType::UInt8: {
        auto v = r.raw<std::uint8_t>("a value");
        TESSERA_TRY(v);
        return Scalar(std::uint64_t(*v));
    }
    case GgufValueType::Int8: {
        auto v = r.raw<std::int8_t>("a value");
        TESSERA_TRY(v);
        return Scalar(std::int64_t(*v));
    }
    case GgufValueType::UInt16: {
        auto v = r.raw<std::uint16_t>("a value");
        TESSERA_TRY(v);
        return Scalar(std::uint64_t(*v));
    }
    case GgufValueType::Int16: {
        auto v = r.raw<std::int16_t>("a value");
        TESSERA_TRY(v);
        return Scalar(std::int64_t(*v));
    }
    case GgufValueType::UInt32: {
        auto v = r.raw<std::uint32_t>("a value");
        TESSERA_TRY(v);
        return Scalar(std::uint64_t(*v));
    }
    case GgufValueType::Int32: {
        auto v = r.raw<std::int32_t>("a value");
        TESSERA_TRY(v);
        return Scalar(std::int64_t(*v));
    }
    case GgufValueType::UInt64: {
        auto v = r.raw<std::uint64_t>("a value");
        TESSERA_TRY(v);
        return Scalar(*v);
    }
    case GgufValueType::Int64: {
        auto v = r.raw<std::int64_t>("a value");
        TESSERA_TRY(v);
        return Scalar(*v);
    }
    case GgufValueType::Float32: {
        auto v = r.raw<float>("a value");
        TESSERA_TRY(v);
        return Scalar(double(*v));
    }
    case GgufValueType::Float64: {
        auto v = r.raw<double>("a value");
        TESSERA_TRY(v);
        return Scalar(*v);
    }
    case GgufValueType::Bool: {
        auto v = r.raw<std::uint8_t>("a value");
        TESSERA_TRY(v);
        return Scalar(*v != 0);
    }
    case GgufValueType::String: {
        auto v = r.str("a string value");
        TESSERA_TRY(v);
        return Scalar(*v);
    }
    case GgufValueType::Array:
        break;
    }
    return makeError("metadata value type " + std::to_string(static_cast<std::uint32_t>(t)) + " is unknown");
}

Result<GgufValue> readValue(Reader& r, GgufValueType type)
{
    GgufValue value;
    value.type = type;
    if (type != GgufValueType::Array) {
        auto s = readScalar(r, type);
        TESSERA_TRY(s);
        std::visit([&](auto&& x) { value.data = x; }, std::move(*s));
        return value;
    }
    auto et = r.raw<std::uint32_t>("an array type");
    TESSERA_TRY(et);
    if (*et > 12 || *et == static_cast<std::uint32_t>(GgufValueType::Array))
        return makeError("array element type " + std::to_string(*et) + " is not supported");
    value.elementType = static_cast<GgufValueType>(*et);
    auto n = r.raw<std::uint64_t>("an array length");
    TESSERA_TRY(n);
    // Every element takes at least scalarSize bytes: a length the file cannot hold is refused before allocating.
    if (*n > r.remaining() / scalarSize(value.elementType))
        return makeError("an array claims " + std::to_string(*n) + " elements, more than the file holds");
    switch (value.elementType) {
    case GgufValueType::String: {
        std::vector<std::string> v;
        v.reserve(static_cast<std::size_t>(*n));
        for (std::uint64_t i = 0; i < *n; ++i) {
            auto s = r.str("a string array");
            TESSERA_TRY(s);
            v.push_back(std::move(*s));
        }
        value.data = std::move(v);
        break;
    }
    case GgufValueType::Float32:
    case GgufValueType::Float64: {
        std::vector<double> v;
        v.reserve(static_cast<std::size_t>(*n));
        for (std::uint64_t i = 0; i < *n; ++i) {
            auto s = readScalar(r, value.elementType);
            TESSERA_TRY(s);
            v.push_back(std::get<double>(*s));
        }
        value.data = std::move(v);
        break;
    }
    case GgufValueType::Bool: {
        std::vector<bool> v;
        v.reserve(static_cast<std::size_t>(*n));
        for (std::uint64_t i = 0; i < *n; ++i) {
            auto s = readScalar(r, value.elementType);
            TESSERA_TRY(s);
            v.push_back(std::get<bool>(*s));
        }
        value.data = std::move(v);
        break;
    }
    default:
        if (isSigned(value.elementType)) {
            std::vector<std::int64_t> v;
            v.reserve(static_cast<std::size_t>(*n));
            for (std::uint64_t i = 0; i < *n; ++i) {
                auto s = readScalar(r, value.elementType);
                TESSERA_TRY(s);
                v.push_back(std::get<std::int64_t>(*s));
            }
            value.data = std::move(v);
        } else {
            std::vector<std::uint64_t> v;
            v.reserve(static_cast<std::size_t>(*n));
            for (std::uint64_t i = 0; i < *n; ++i) {
                auto s = readScalar(r, value.elementType);
                TESSERA_TRY(s);
                v.push_back(std::get<std::uint64_t>(*s));
            }
            value.data = std::move(v);
        }
    }
    return value;
}

/// Every tensor's data lies aligned inside the data section, and no two tensors share a byte: two names for the
/// same bytes would be written back as two tensors, and a change to one would be a change to the other.
Status checkTensorData(const GgufHeader& h, std::uint64_t fileSize)
{
    auto shown = [](const GgufTensorInfo& t) { return "tensor '" + printableText(t.name) + "'"; };
    const std::uint64_t dataBytes = h.dataStart > fileSize ? 0 : fileSize - h.dataStart;
    for (const auto& t : h.tensors) {
        if (t.offset % h.alignment != 0)
            return makeError(shown(t) + ": data offset " + std::to_string(t.offset) + " is not aligned to "
                             + std::to_string(h.alignment));
        if (t.offset > dataBytes || t.bytes > dataBytes - t.offset)
            return makeError(shown(t) + ": its data (bytes " + std::to_string(t.offset) + "–"
                             + std::to_string(t.offset + t.bytes) + " of the data section) reaches past the end of "
                             "the file, whose data section holds " + std::to_string(dataBytes) + " bytes (truncated?)");
    }
    std::vector<const GgufTensorInfo*> byOffset;
    for (const auto& t : h.tensors)
        if (t.bytes > 0)
            byOffset.push_back(&t);
    std::stable_sort(byOffset.begin(), byOffset.end(),
                     [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < byOffset.size(); ++i) {
        const GgufTensorInfo& a = *byOffset[i - 1];
        const GgufTensorInfo& b = *byOffset[i];
        if (a.offset + a.bytes > b.offset)
            return makeError(shown(a) + " and " + shown(b) + " overlap: their data are bytes "
                             + std::to_string(a.offset) + "–" + std::to_string(a.offset + a.bytes) + " and "
                             + std::to_string(b.offset) + "–" + std::to_string(b.offset + b.bytes)
                             + " of the data section");
    }
    return Status::success();
}

} // namespace

bool looksLikeGguf(const ByteView& file)
{
    return file.size() >= 4 && std::memcmp(file.data(), "GGUF", 4) == 0;
}

const GgufValue* GgufHeader::find(const std::string& key) const
{
    for (const auto& kv : metadata)
        if (kv.key == key)
            return &kv.value;
    return nullptr;
}

Result<GgufHeader> parseGgufHeader(const ByteView& file)
{
    if (!looksLikeGguf(file))
        return makeError("not a GGUF file (no GGUF magic)");
    Reader r(file);
    r.pos = 4;
    GgufHeader h;
    auto version = r.raw<std::uint32_t>("the version");
    TESSERA_TRY(version);
    if (*version != 2 && *version != 3)
        return makeError("GGUF version " + std::to_string(*version) + " is not supported (2 and 3 are)");
    h.version = *version;
    auto tensorCount = r.raw<std::uint64_t>("the tensor count");
    TESSERA_TRY(tensorCount);
    auto kvCount = r.raw<std::uint64_t>("the metadata count");
    TESSERA_TRY(kvCount);
    if (*kvCount > r.remaining() / 12 || *tensorCount > r.remaining() / 28)
        return makeError("the header claims " + std::to_string(*kvCount) + " metadata entries and "
                         + std::to_string(*tensorCount) + " tensors, more than the file holds");
    std::set<std::string> keys;
    for (std::uint64_t i = 0; i < *kvCount; ++i) {
        auto key = r.str("a metadata key");
        TESSERA_TRY(key);
        // Which of two values a reader takes is its own choice (llama.cpp refuses the file): never guess.
        if (!keys.insert(*key).second)
            return makeError("metadata key '" + printableText(*key) + "' appears twice");
        auto type = r.raw<std::uint32_t>("a metadata type");
        TESSERA_TRY(type);
        if (*type > 12)
            return makeError(printableText(*key) + ": metadata value type " + std::to_string(*type) + " is unknown");
        auto value = readValue(r, static_cast<GgufValueType>(*type));
        if (!value)
            return value.error().withContext(printableText(*key));
        h.metadata.push_back({ std::move(*key), std::move(*value) });
    }
    if (const GgufValue* a = h.find("general.alignment")) {
        const auto align = a->asInt();
        if (!align || *align <= 0 || *align > (1 << 20) || (*align & (*align - 1)) != 0)
            return makeError("general.alignment must be a power of two (got " + a->summary() + ")");
        h.alignment = static_cast<std::uint64_t>(*align);
    }
    std::set<std::string> names;
    for (std::uint64_t i = 0; i < *tensorCount; ++i) {
        GgufTensorInfo t;
        auto name = r.str("a tensor name");
        TESSERA_TRY(name);
        t.name = std::move(*name);
        const std::string shown = "tensor '" + printableText(t.name) + "'";
        if (!names.insert(t.name).second)
            return makeError(shown + " appears twice");
        auto nd = r.raw<std::uint32_t>("a tensor's dimension count");
        TESSERA_TRY(nd);
        if (*nd > 4)
            return makeError(shown + ": " + std::to_string(*nd) + " dimensions (ggml has at most 4)");
        // The product of the non-zero dimensions is bounded too: a 0 beside huge dimensions holds no data, but
        // every product taken over a part of the shape (strides, boxes) must still fit.
        std::uint64_t nonZero = 1;
        for (std::uint32_t d = 0; d < *nd; ++d) {
            auto ne = r.raw<std::uint64_t>("a tensor's dimensions");
            TESSERA_TRY(ne);
            if (*ne > (1ull << 40) || (*ne != 0 && nonZero > (1ull << 50) / *ne))
                return makeError(shown + ": dimension " + std::to_string(*ne) + " is too large");
            if (*ne != 0)
                nonZero *= *ne;
            t.dims.push_back(*ne);
        }
        const std::uint64_t elements
            = std::find(t.dims.begin(), t.dims.end(), 0) == t.dims.end() ? nonZero : 0;
        auto type = r.raw<std::uint32_t>("a tensor type");
        TESSERA_TRY(type);
        t.type = *type;
        auto offset = r.raw<std::uint64_t>("a tensor offset");
        TESSERA_TRY(offset);
        t.offset = *offset;
        const auto [block, blockBytes] = ggmlBlock(t.type);
        if (block == 0)
            return makeError(shown + ": ggml type " + std::to_string(t.type) + " is not supported by Tessera ("
                             + ggmlTypeList() + " are)");
        if (!t.dims.empty() && t.dims[0] % block != 0)
            return makeError(shown + ": rows of " + std::to_string(t.dims[0]) + " are not whole "
                             + ggmlTypeName(t.type) + " blocks");
        t.bytes = elements / block * blockBytes;
        h.tensors.push_back(std::move(t));
    }
    h.dataStart = (r.pos + h.alignment - 1) / h.alignment * h.alignment;
    TESSERA_TRY(checkTensorData(h, file.size()));
    return h;
}

} // namespace tessera
