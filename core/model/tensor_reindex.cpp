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
        // Strides are in elements of the stored dtype; the skipped entries are never read.
        q.dataOffset += static_cast<std::uint64_t>((lo - p.offsets[dim]) * p.strides[dim])
            * static_cast<std::uint64_t>(dtypeSize(p.storedDtype));
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

} // namespace tessera
