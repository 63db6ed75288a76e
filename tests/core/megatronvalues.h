// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The Megatron mapping and merge tests fill 16-bit tensors with distinct values and compare what the merge
// engine assembles with row ranges of the global values.

#include "merge/merge_engine.h"
#include "merge/merge_plan.h"
#include "pickle/torch_save_writer.h"

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

/// Writes a per-rank torch.save file of `specs`, tensor i holding `data[i]`.
inline void writeRankFile(const std::string& path, const std::vector<TorchSaveTensor>& specs,
                          const std::vector<Values>& data)
{
    auto status = writeTorchSave(path, specs, [&](std::size_t i, std::uint64_t off, std::uint8_t* dst, std::uint64_t n) {
        std::memcpy(dst, reinterpret_cast<const std::uint8_t*>(data[i].data()) + off, n);
        return Status::success();
    });
    if (!status)
        qFatal("%s", status.error().message.c_str());
}

inline Values cat(std::initializer_list<Values> parts)
{
    Values out;
    for (const auto& p : parts)
        out.insert(out.end(), p.begin(), p.end());
    return out;
}

/// How a TP rank holds a global tensor (Megatron's per-rank files).
enum class Split { Replicated, Rows, Columns, Glu };

/// Rank `r` of `tp`'s slice of a row-major 1-D or 2-D tensor.
inline Values localSlice(const Values& g, const Shape& shape, Split split, int r, int tp, Shape& local)
{
    const std::int64_t rowsN = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
    local = shape;
    Values out;
    auto rowRange = [&](std::int64_t begin, std::int64_t n) {
        out.insert(out.end(), g.begin() + begin * cols, g.begin() + (begin + n) * cols);
    };
    switch (split) {
    case Split::Replicated:
        return g;
    case Split::Rows:
        local[0] = rowsN / tp;
        rowRange(r * local[0], local[0]);
        return out;
    case Split::Columns:
        local[1] = cols / tp;
        for (std::int64_t i = 0; i < rowsN; ++i)
            out.insert(out.end(), g.begin() + i * cols + r * local[1], g.begin() + i * cols + (r + 1) * local[1]);
        return out;
    case Split::Glu: {
        // Rank r holds [gate_r; up_r] of the global [gate; up].
        const std::int64_t half = rowsN / 2, per = half / tp;
        local[0] = 2 * per;
        rowRange(r * per, per);
        rowRange(half + r * per, per);
        return out;
    }
    }
    return out;
}

} // namespace tessera::test
