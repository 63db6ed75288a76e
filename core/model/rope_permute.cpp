// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/rope_permute.h"

namespace tessera {

namespace {

/// Both directions. Forward: source (Hugging Face) row h·d + j·d/2 + i goes to output position (h, i, j) of a
/// [heads, d/2, 2] grid. Inverse: source (GGUF) row h·d + 2i + j goes to (h, j, i) of a [heads, 2, d/2] grid.
/// Whole heads are one box with the grid's source strides; a piece that starts or ends inside a head is cut
/// into runs.
Result<TensorInfo> reindexRows(const TensorInfo& t, std::int64_t heads, const std::string& name, bool forward)
{
    if (t.shape.empty() || heads <= 0 || t.shape[0] % heads != 0 || (t.shape[0] / heads) % 2 != 0)
        return makeError(t.name + ": " + std::to_string(t.shape.empty() ? 0 : t.shape[0]) + " rows do not split into "
                         + std::to_string(heads) + " heads of an even size, as the rotary permutation needs");
    const std::int64_t hd = t.shape[0] / heads;
    const std::int64_t half = hd / 2;
    const std::int64_t n1 = forward ? half : 2, n2 = forward ? 2 : half;
    // Source rows per step of the grid's second and third dims.
    const std::int64_t r1 = 1, r2 = forward ? half : 2;
    TensorInfo out;
    out.name = name;
    out.dtype = t.dtype;
    out.placement = t.placement;
    out.meshIndex = t.meshIndex;
    out.shape = { heads, n1, n2 };
    out.shape.insert(out.shape.end(), t.shape.begin() + 1, t.shape.end());
    for (const Piece& p : t.pieces) {
        if (p.shape.empty())
            continue;
        const std::int64_t es = static_cast<std::int64_t>(dtypeSize(p.storedDtype));
        const std::int64_t st0 = p.strides[0];
        auto box = [&](std::int64_t firstRow, Shape offsets3, Shape shape3) {
            Piece q = p;
            q.offsets = offsets3;
            q.offsets.insert(q.offsets.end(), p.offsets.begin() + 1, p.offsets.end());
            q.shape = shape3;
            q.shape.insert(q.shape.end(), p.shape.begin() + 1, p.shape.end());
            q.strides = { hd * st0, r1 * st0, r2 * st0 };
            q.strides.insert(q.strides.end(), p.strides.begin() + 1, p.strides.end());
            q.dataOffset = p.dataOffset + static_cast<std::uint64_t>((firstRow - p.offsets[0]) * st0 * es);
            out.pieces.push_back(std::move(q));
        };
        std::int64_t row = p.offsets[0];
        const std::int64_t end = p.offsets[0] + p.shape[0];
        while (row < end) {
            const std::int64_t h = row / hd, within = row % hd;
            if (within == 0 && end - row >= hd) {
                const std::int64_t n = (end - row) / hd;
                box(row, { h, 0, 0 }, { n, n1, n2 });
                row += n * hd;
                continue;
            }
            if (forward) {
                // Source row within = j·half + i → output (h, i, j): a run of i at fixed j.
                const std::int64_t j = within / half, i = within % half;
                const std::int64_t n = std::min(half - i, end - row);
                box(row, { h, i, j }, { 1, n, 1 });
                row += n;
            } else {
                // Source row within = 2i + j → output (h, j, i): one row at a time.
                const std::int64_t i = within / 2, j = within % 2;
                box(row, { h, j, i }, { 1, 1, 1 });
                row += 1;
            }
        }
    }
    return out;
}

} // namespace

Result<TensorInfo> permuteRotaryRows(const TensorInfo& tensor, std::int64_t heads, const std::string& name)
{
    return reindexRows(tensor, heads, name, true);
}

} // namespace tessera
