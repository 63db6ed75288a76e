// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tessera {

/// 64-bit FNV-1a over strings and integers: stable across machines and builds, which std::hash is not, so
/// processes on different nodes that hash the same plan agree on the name it gives.
struct FnvHash {
    std::uint64_t h = 1469598103934665603ull;
    FnvHash& add(const std::string& s)
    {
        for (unsigned char c : s)
            h = (h ^ c) * 1099511628211ull;
        return add(std::uint64_t(s.size())); // "ab" + "c" and "a" + "bc" differ
    }
    FnvHash& add(std::uint64_t v)
    {
        for (int i = 0; i < 8; ++i)
            h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
        return *this;
    }
    /// 16 hex digits.
    std::string hex() const
    {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
        return buf;
    }
};

} // namespace tessera
