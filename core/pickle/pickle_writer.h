// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Writing pickles: the few protocol-2 opcodes torch.save's and DCP's pickles are made of.

#include "model/checkpoint.h"
#include "model/dtype.h"
#include "pickle/torch_save.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tessera {

/// torch's storage class for `dtype` ("BFloat16Storage"); nullptr for a dtype torch.save cannot store.
const char* torchStorageClass(DType dtype);

/// A protocol-2 pickle writer emitting only the opcodes torch.save's pickles use.
class Pickler {
public:
    std::string out;
    void op(char c) { out += c; }
    void global(const std::string& module, const std::string& name) { out += 'c' + module + '\n' + name + '\n'; }
    void str(const std::string& s)
    {
        op('X');
        le(static_cast<std::uint32_t>(s.size()), 4);
        out += s;
    }
    void integer(std::int64_t v)
    {
        if (v >= 0 && v < 256) {
            op('K');
            le(static_cast<std::uint64_t>(v), 1);
        } else if (v >= 0 && v < 65536) {
            op('M');
            le(static_cast<std::uint64_t>(v), 2);
        } else if (v >= INT32_MIN && v <= INT32_MAX) {
            op('J');
            le(static_cast<std::uint64_t>(static_cast<std::uint32_t>(static_cast<std::int32_t>(v))), 4);
        } else {
            long8(v);
        }
    }
    /// BINFLOAT: an 8-byte big-endian IEEE double.
    void real(double v)
    {
        op('G');
        std::uint64_t bits = 0;
        std::memcpy(&bits, &v, sizeof bits);
        for (int i = 7; i >= 0; --i)
            out += static_cast<char>((bits >> (8 * i)) & 0xFF);
    }
    /// LONG1 with the given little-endian two's-complement bytes (an int beyond 64 bits, as read).
    void long1(const std::string& bytes)
    {
        op('\x8a');
        le(bytes.size(), 1);
        out += bytes;
    }
    /// LONG1 with 8 bytes: how Python pickles a 64-bit hash.
    void long8(std::int64_t v)
    {
        op('\x8a');
        le(8, 1);
        le(static_cast<std::uint64_t>(v), 8);
    }
    void intTuple(const Shape& values)
    {
        if (values.empty()) {
            op(')');
            return;
        }
        op('(');
        for (auto v : values)
            integer(v);
        op('t');
    }
    void intList(const std::vector<std::int64_t>& values)
    {
        op(']');
        if (values.empty())
            return;
        op('(');
        for (auto v : values)
            integer(v);
        op('e');
    }
    void dtype(DType d) { global("torch", std::string(torchName(d))); }
    /// LONG_BINPUT / LONG_BINGET: one object shared by several references.
    void put(std::uint32_t slot)
    {
        op('r');
        le(slot, 4);
    }
    void get(std::uint32_t slot)
    {
        op('j');
        le(slot, 4);
    }
    /// `torch.Size(values)`
    void size(const Shape& values)
    {
        global("torch", "Size");
        intTuple(values);
        op('\x85');
        op('R');
    }
    /// `torch._utils._rebuild_tensor_v2(storage, 0, shape, stride, False, OrderedDict())`
    void tensor(DType d, const Shape& shape, const std::string& key, std::uint64_t storageElements)
    {
        global("torch._utils", "_rebuild_tensor_v2");
        op('(');
        op('(');
        str("storage");
        global("torch", torchStorageClass(d));
        str(key);
        str("cpu");
        integer(static_cast<std::int64_t>(storageElements));
        op('t');
        op('Q');
        integer(0);
        intTuple(shape);
        intTuple(contiguousStrides(shape));
        op('\x89');
        global("collections", "OrderedDict");
        op(')');
        op('R');
        op('t');
        op('R');
    }

private:
    void le(std::uint64_t v, int bytes)
    {
        for (int i = 0; i < bytes; ++i)
            out += static_cast<char>((v >> (8 * i)) & 0xFF);
    }
};

} // namespace tessera
