// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/tensor_reindex.h"

#include <algorithm>

namespace tessera {

std::vector<Piece> slicePieces(const TensorInfo& tensor, std::size_t dim, std::int64_t begin, std::int64_t length,
                               std::int64_t destBegin)
{
    std::vector<Piece> out;
    for (const Piece& p : tensor.pieces) {
        if (dim >= p.shape.size() || dim >= p.offsets.size() || dim >= p.strides.size())
            continue;
        const std::int64_t lo = std::max(begin, p.offsets[dim]);
        const std::int64_t hi = std::min(begin + length, p.offsets[dim] + p.shape[dim]);
        if (lo >= hi)
            continue;
        Piece q = p;
        q.offsets[dim] = destBegin + (lo - begin);
        q.shape[dim] = hi - lo;
        // Strides are in stored elements; the skipped entries are never read.
        skipStoredElements(q, static_cast<std::uint64_t>((lo - p.offsets[dim]) * p.strides[dim]));
        out.push_back(std::move(q));
    }
    return out;
}

TensorInfo selectLeading(const TensorInfo& tensor, std::int64_t index, const std::string& name)
{
    TensorInfo out;
    out.name = name;
    out.dtype = tensor.dtype;
    out.placement = tensor.placement;
    if (tensor.shape.empty())
        return out;
    out.shape.assign(tensor.shape.begin() + 1, tensor.shape.end());
    for (Piece& p : slicePieces(tensor, 0, index, 1, 0)) {
        p.offsets.erase(p.offsets.begin());
        p.shape.erase(p.shape.begin());
        p.strides.erase(p.strides.begin());
        out.pieces.push_back(std::move(p));
    }
    return out;
}

TensorInfo placeInStack(const TensorInfo& tensor, std::int64_t index, std::int64_t count)
{
    TensorInfo out = tensor;
    out.shape.insert(out.shape.begin(), count);
    if (!out.savedShape.empty())
        out.savedShape.insert(out.savedShape.begin(), count);
    for (Piece& p : out.pieces) {
        p.offsets.insert(p.offsets.begin(), index);
        p.shape.insert(p.shape.begin(), 1);
        p.strides.insert(p.strides.begin(), 0); // a dim of one entry: its stride is never used
    }
    return out;
}

TensorInfo permuteDims(const TensorInfo& tensor, const std::vector<std::size_t>& order)
{
    auto permuted = [&](const Shape& s) {
        Shape out;
        for (std::size_t d : order)
            out.push_back(d < s.size() ? s[d] : 1);
        return out;
    };
    TensorInfo out = tensor;
    out.shape = permuted(tensor.shape);
    out.savedShape.clear(); // a reordered tensor is saved as it is boxed
    for (Piece& p : out.pieces) {
        // Source strides go with their dims: the bytes stay where they are, only the walk over them changes.
        p.offsets = permuted(p.offsets);
        p.shape = permuted(p.shape);
        p.strides = permuted(p.strides);
    }
    return out;
}

TensorInfo pairHalves(const TensorInfo& tensor)
{
    TensorInfo out;
    out.name = tensor.name;
    out.dtype = tensor.dtype;
    out.placement = tensor.placement;
    if (tensor.shape.empty())
        return out;
    const std::int64_t half = tensor.shape[0] / 2;
    out.shape = tensor.shape;
    out.shape[0] = half;
    out.shape.insert(out.shape.begin() + 1, 2);
    for (std::int64_t k = 0; k < 2; ++k)
        for (Piece& p : slicePieces(tensor, 0, k * half, half, 0)) {
            // Rows [k·n, (k + 1)·n) become entry k of the new dim 1; the same bytes, walked as (i, k).
            p.offsets.insert(p.offsets.begin() + 1, k);
            p.shape.insert(p.shape.begin() + 1, 1);
            p.strides.insert(p.strides.begin() + 1, half * p.strides[0]);
            out.pieces.push_back(std::move(p));
        }
    return out;
}

} // namespace tessera
