// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/rope_permute.h"
#include "io/printable.h"

#include <algorithm>

namespace tessera {

/// Hugging Face row h·d + j·d/2 + i goes to position (h, i, j) of a [heads, d/2, 2] grid, so the grid's source
/// strides are (d, 1, d/2) rows. Whole heads are one box; a piece that starts or ends inside a head (an uneven
/// FSDP shard) is cut into runs of i at fixed j.
Result<TensorInfo> permuteRotaryRows(const TensorInfo& t, std::int64_t heads, const std::string& name)
{
    if (t.shape.empty() || heads <= 0 || t.shape[0] % heads != 0 || (t.shape[0] / heads) % 2 != 0)
        return makeError(printableText(t.name) + ": " + std::to_string(t.shape.empty() ? 0 : t.shape[0])
                         + " rows do not split into "
                         + std::to_string(heads) + " heads of an even size, as the rotary permutation needs");
    const std::int64_t hd = t.shape[0] / heads;
    const std::int64_t half = hd / 2;
    TensorInfo out;
    out.name = name;
    out.dtype = t.dtype;
    out.placement = t.placement;
    out.meshIndex = t.meshIndex;
    out.shape = { heads, half, 2 };
    out.shape.insert(out.shape.end(), t.shape.begin() + 1, t.shape.end());
    for (const Piece& p : t.pieces) {
        if (p.shape.empty())
            continue;
        const std::int64_t st0 = p.strides[0];
        auto box = [&](std::int64_t firstRow, Shape offsets3, Shape shape3) {
            Piece q = p;
            q.offsets = offsets3;
            q.offsets.insert(q.offsets.end(), p.offsets.begin() + 1, p.offsets.end());
            q.shape = shape3;
            q.shape.insert(q.shape.end(), p.shape.begin() + 1, p.shape.end());
            q.strides = { hd * st0, st0, half * st0 };
            q.strides.insert(q.strides.end(), p.strides.begin() + 1, p.strides.end());
            skipStoredElements(q, static_cast<std::uint64_t>((firstRow - p.offsets[0]) * st0));
            out.pieces.push_back(std::move(q));
        };
        std::int64_t row = p.offsets[0];
        const std::int64_t end = p.offsets[0] + p.shape[0];
        while (row < end) {
            const std::int64_t h = row / hd, within = row % hd;
            if (within == 0 && end - row >= hd) {
                const std::int64_t n = (end - row) / hd;
                box(row, { h, 0, 0 }, { n, half, 2 });
                row += n * hd;
                continue;
            }
            const std::int64_t j = within / half, i = within % half;
            const std::int64_t n = std::min(half - i, end - row);
            box(row, { h, i, j }, { 1, n, 1 });
            row += n;
        }
    }
    return out;
}

} // namespace tessera
