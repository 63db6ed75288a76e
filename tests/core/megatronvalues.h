// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The Megatron mapping and merge tests fill 16-bit tensors with distinct values and compare what the merge
// engine assembles with row ranges of the global values.

#include "merge/merge_engine.h"
#include "merge/merge_plan.h"

#include <QTest>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <vector>

namespace tessera::test {

using Values = std::vector<std::uint16_t>;

/// The values of a (mapped) tensor as the merge engine assembles them.
inline Values materialize(const TensorInfo& t)
{
    auto planned = planTensorCopy(t, 0, std::nullopt);
    if (!planned)
        qFatal("%s", planned.error().message.c_str());
    std::vector<std::uint8_t> buffer(planned->bytes);
    SourceFiles files;
    auto status = materializeTensor(files, t, *planned, buffer.data());
    if (!status)
        qFatal("%s", status.error().message.c_str());
    Values v(buffer.size() / 2);
    std::memcpy(v.data(), buffer.data(), buffer.size());
    return v;
}

/// Rows [begin, begin + n) of a row-major tensor with `rowSize` elements per row.
inline Values rows(const Values& v, std::int64_t rowSize, std::int64_t begin, std::int64_t n)
{
    return Values(v.begin() + begin * rowSize, v.begin() + (begin + n) * rowSize);
}

inline Values cat(std::initializer_list<Values> parts)
{
    Values out;
    for (const auto& p : parts)
        out.insert(out.end(), p.begin(), p.end());
    return out;
}

} // namespace tessera::test
