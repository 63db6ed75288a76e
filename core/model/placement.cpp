// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/placement.h"

#include <algorithm>
#include <map>

namespace tessera {

namespace {

/// Largest _StridedShard split factor accepted (a product of mesh sizes in torch).
constexpr std::int64_t kMaxSplitFactor = 1 << 20;
/// Pieces one rank's shard may fall into; torch layouts give a handful, hostile split factors billions.
constexpr std::uint64_t kMaxLocalBoxes = 1 << 20;

/// A contiguous run of global indices along one tensor dim. A rank's indices along a dim are a list of runs
/// in local order; the local tensor is the Cartesian product of its dims' run lists.
struct Run {
    std::int64_t start = 0;
    std::int64_t length = 0;
};
using Runs = std::vector<Run>;

std::int64_t totalLength(const Runs& runs)
{
    std::int64_t n = 0;
    for (const auto& r : runs)
        n += r.length;
    return n;
}

/// Local positions [offset, offset+size) of a run list, appended to `out`.
void appendSlice(const Runs& runs, std::int64_t offset, std::int64_t size, Runs& out)
{
    std::int64_t pos = 0;
    for (const auto& r : runs) {
        if (size <= 0)
            break;
        const std::int64_t runEnd = pos + r.length;
        if (offset < runEnd) {
            const std::int64_t skip = offset - pos;
            const std::int64_t take = std::min(size, r.length - skip);
            if (take > 0) {
                if (!out.empty() && out.back().start + out.back().length == r.start + skip)
                    out.back().length += take; // still contiguous in the global tensor
                else
                    out.push_back(Run { r.start + skip, take });
            }
            offset += take;
            size -= take;
        }
        pos = runEnd;
    }
}

/// Shard / reordered _StridedShard: chunk c of n of the current local indices.
Runs applyChunk(const Runs& runs, std::int64_t n, std::int64_t c)
{
    const ChunkRange range = chunkRange(totalLength(runs), n, c);
    Runs out;
    appendSlice(runs, range.offset, range.size, out);
    return out;
}

/// A lone _StridedShard, as `_StridedShard._split_tensor` does it: split the local indices into `sf` chunks,
/// split each of them into n chunks, and keep chunk c of each, concatenated.
Runs applyStridedSplit(const Runs& runs, std::int64_t splitFactor, std::int64_t n, std::int64_t c)
{
    const std::int64_t length = totalLength(runs);
    Runs out;
    for (std::int64_t j = 0; j < splitFactor; ++j) {
        const ChunkRange piece = chunkRange(length, splitFactor, j);
        const ChunkRange sub = chunkRange(piece.size, n, c);
        appendSlice(runs, piece.offset + sub.offset, sub.size, out);
    }
    return out;
}

struct Step {
    int meshDim = 0;
    int dim = 0;
    bool stridedSplit = false;  ///< lone _StridedShard: split the _split_tensor way
    std::int64_t splitFactor = 1;
};

/// torch's `_explicit_order_placements`, extended with the lone _StridedShards it leaves out: those come last
/// (they follow every other shard of their dim in mesh order, and shards of other dims commute with them).
Result<std::vector<Step>> orderSteps(const Shape& meshShape, const std::vector<Placement>& placements)
{
    std::vector<Step> ordered;
    std::map<int, std::vector<int>> deferred; // tensor dim → mesh dims of pending _StridedShards
    std::map<int, bool> stridedPartEnded;
    for (int meshDim = 0; meshDim < static_cast<int>(placements.size()); ++meshDim) {
        const Placement& p = placements[static_cast<size_t>(meshDim)];
        if (p.kind == Placement::Kind::StridedShard) {
            deferred[p.dim].push_back(meshDim);
            continue;
        }
        if (p.kind != Placement::Kind::Shard)
            continue;
        if (stridedPartEnded[p.dim])
            return makeError("placement " + p.text() + " on mesh dim " + std::to_string(meshDim)
                             + " shards tensor dim " + std::to_string(p.dim)
                             + " again after its _StridedShard part has ended; torch cannot lay this out either");
        ordered.push_back(Step { meshDim, p.dim, false, 1 });
        auto it = deferred.find(p.dim);
        if (it == deferred.end())
            continue;
        stridedPartEnded[p.dim] = true;
        std::int64_t aggregate = meshShape[static_cast<size_t>(meshDim)];
        std::vector<int> strided = std::move(it->second);
        deferred.erase(it);
        // Innermost first: the _StridedShard nearest the Shard splits the Shard's chunks.
        for (auto s = strided.rbegin(); s != strided.rend(); ++s) {
            const Placement& sp = placements[static_cast<size_t>(*s)];
            if (sp.splitFactor != aggregate)
                return makeError(sp.text() + " on mesh dim " + std::to_string(*s) + " needs split_factor "
                                 + std::to_string(aggregate) + " (the product of the mesh sizes that shard dim "
                                 + std::to_string(p.dim) + " after it) to be reordered before " + p.text()
                                 + " on mesh dim " + std::to_string(meshDim));
            aggregate *= meshShape[static_cast<size_t>(*s)];
            ordered.push_back(Step { *s, p.dim, false, 1 });
        }
    }
    std::vector<Step> lone;
    for (const auto& [dim, meshDims] : deferred)
        for (int meshDim : meshDims)
            lone.push_back(Step { meshDim, dim, true, placements[static_cast<size_t>(meshDim)].splitFactor });
    std::sort(lone.begin(), lone.end(), [](const Step& a, const Step& b) { return a.meshDim < b.meshDim; });
    ordered.insert(ordered.end(), lone.begin(), lone.end());
    return ordered;
}

Status validate(const Shape& globalShape, const Shape& meshShape, const Shape& coordinate,
                const std::vector<Placement>& placements)
{
    if (placements.size() != meshShape.size())
        return makeError("the DTensor has " + std::to_string(placements.size()) + " placements but its mesh "
                         + shapeToString(meshShape) + " has " + std::to_string(meshShape.size())
                         + " dims; there must be one placement per mesh dim");
    if (coordinate.size() != meshShape.size())
        return makeError("mesh coordinate " + shapeToString(coordinate) + " has " + std::to_string(coordinate.size())
                         + " entries but the mesh " + shapeToString(meshShape) + " has "
                         + std::to_string(meshShape.size()) + " dims");
    for (auto size : globalShape)
        if (size < 0)
            return makeError("global shape " + shapeToString(globalShape) + " has a negative size");
    for (size_t i = 0; i < meshShape.size(); ++i) {
        if (meshShape[i] < 1)
            return makeError("mesh " + shapeToString(meshShape) + " has a dim of size " + std::to_string(meshShape[i])
                             + "; every mesh dim needs at least one rank");
        if (coordinate[i] < 0 || coordinate[i] >= meshShape[i])
            return makeError("mesh coordinate " + shapeToString(coordinate) + " is outside the mesh "
                             + shapeToString(meshShape) + " on mesh dim " + std::to_string(i));
        const Placement& p = placements[i];
        if (p.kind == Placement::Kind::Shard || p.kind == Placement::Kind::StridedShard) {
            if (p.dim < 0 || p.dim >= static_cast<int>(globalShape.size()))
                return makeError(p.text() + " on mesh dim " + std::to_string(i) + " shards a dim the "
                                 + std::to_string(globalShape.size()) + "-dim tensor of shape "
                                 + shapeToString(globalShape) + " does not have");
            if (p.kind == Placement::Kind::StridedShard && p.splitFactor < 1)
                return makeError(p.text() + " on mesh dim " + std::to_string(i)
                                 + " has a split factor below 1");
            // The split loops once per factor; torch's factors are products of mesh sizes, and a file claiming
            // 2^62 must not set the work.
            if (p.kind == Placement::Kind::StridedShard && p.splitFactor > kMaxSplitFactor)
                return makeError(p.text() + " on mesh dim " + std::to_string(i) + " has a split factor above "
                                 + std::to_string(kMaxSplitFactor) + "; torch's are products of mesh sizes");
        }
    }
    return Status::success();
}

Status checkBoxCount(const std::vector<Runs>& runs)
{
    std::uint64_t boxes = 1;
    for (const auto& dimRuns : runs) {
        boxes *= std::max<std::uint64_t>(dimRuns.size(), 1);
        if (boxes > kMaxLocalBoxes)
            return makeError("the placements cut one rank's shard into more than " + std::to_string(kMaxLocalBoxes)
                             + " separate pieces; no torch layout does that");
    }
    return Status::success();
}

} // namespace

std::string Placement::text() const
{
    switch (kind) {
    case Kind::Shard:
        return "Shard(" + std::to_string(dim) + ")";
    case Kind::StridedShard:
        return "_StridedShard(dim=" + std::to_string(dim) + ", sf=" + std::to_string(splitFactor) + ")";
    case Kind::Replicate:
        return "Replicate()";
    case Kind::Partial:
        return "Partial(" + reduceOp + ")";
    }
    return "?";
}

bool Placement::operator==(const Placement& other) const
{
    if (kind != other.kind)
        return false;
    switch (kind) {
    case Kind::Shard:
        return dim == other.dim;
    case Kind::StridedShard:
        return dim == other.dim && splitFactor == other.splitFactor;
    case Kind::Replicate:
        return true;
    case Kind::Partial:
        return reduceOp == other.reduceOp;
    }
    return false;
}

ChunkRange chunkRange(std::int64_t size, std::int64_t n, std::int64_t c)
{
    if (n < 1 || c < 0 || c >= n || size <= 0)
        return ChunkRange { std::max<std::int64_t>(size, 0), 0 };
    const std::int64_t full = (size + n - 1) / n;
    // full·c may exceed size for trailing empty chunks; torch's Shard.local_shard_size_and_offset clamps it.
    const std::int64_t begin = std::min(size, full * c);
    const std::int64_t end = std::min(size, full * (c + 1));
    return ChunkRange { begin, end - begin };
}

Result<LocalLayout> computeLocalLayout(const Shape& globalShape, const Shape& meshShape, const Shape& coordinate,
                                       const std::vector<Placement>& placements)
{
    TESSERA_TRY(validate(globalShape, meshShape, coordinate, placements));
    auto steps = orderSteps(meshShape, placements);
    TESSERA_TRY(steps);

    const size_t ndim = globalShape.size();
    std::vector<Runs> runs(ndim);
    for (size_t d = 0; d < ndim; ++d)
        if (globalShape[d] > 0)
            runs[d].push_back(Run { 0, globalShape[d] });

    for (const Step& step : *steps) {
        const auto md = static_cast<size_t>(step.meshDim);
        Runs& dimRuns = runs[static_cast<size_t>(step.dim)];
        // A strided split walks every run once per factor: bounded, so stacked splits cannot multiply the work.
        if (step.stridedSplit && static_cast<std::uint64_t>(step.splitFactor) * std::max<std::size_t>(dimRuns.size(), 1)
                > kMaxLocalBoxes * 16)
            return makeError("the _StridedShard placements of dim " + std::to_string(step.dim)
                             + " split it into too many pieces; no torch layout does that");
        dimRuns = step.stridedSplit ? applyStridedSplit(dimRuns, step.splitFactor, meshShape[md], coordinate[md])
                                    : applyChunk(dimRuns, meshShape[md], coordinate[md]);
    }

    LocalLayout layout;
    for (size_t i = 0; i < placements.size(); ++i) {
        if (placements[i].kind == Placement::Kind::Replicate && coordinate[i] != 0)
            layout.isReplica = true;
        if (placements[i].kind == Placement::Kind::Partial)
            layout.isPartial = true;
    }
    layout.localShape.resize(ndim);
    layout.globalOffset.resize(ndim);
    bool empty = false;
    for (size_t d = 0; d < ndim; ++d) {
        layout.localShape[d] = totalLength(runs[d]);
        layout.globalOffset[d] = runs[d].empty() ? globalShape[d] : runs[d].front().start;
        empty = empty || layout.localShape[d] == 0;
    }
    if (empty)
        return layout;
    TESSERA_TRY(checkBoxCount(runs));

    // Cartesian product of the per-dim runs, last dim fastest, so boxes follow the local row-major order.
    std::vector<size_t> index(ndim, 0);
    std::vector<Shape> localStarts(ndim);
    for (size_t d = 0; d < ndim; ++d) {
        std::int64_t pos = 0;
        for (const auto& r : runs[d]) {
            localStarts[d].push_back(pos);
            pos += r.length;
        }
    }
    while (true) {
        LocalBox box;
        box.globalOffsets.resize(ndim);
        box.shape.resize(ndim);
        box.localOffsets.resize(ndim);
        for (size_t d = 0; d < ndim; ++d) {
            box.globalOffsets[d] = runs[d][index[d]].start;
            box.shape[d] = runs[d][index[d]].length;
            box.localOffsets[d] = localStarts[d][index[d]];
        }
        layout.boxes.push_back(std::move(box));
        size_t d = ndim;
        while (d > 0) {
            --d;
            if (++index[d] < runs[d].size())
                break;
            index[d] = 0;
            if (d == 0)
                return layout;
        }
        if (ndim == 0)
            return layout;
    }
}

std::string describePlacements(const std::vector<Placement>& placements, const Shape& meshShape,
                               const std::vector<std::string>& dimNames)
{
    std::string out;
    if (placements.size() == 1) {
        out = placements.front().text();
    } else {
        out = "(";
        for (size_t i = 0; i < placements.size(); ++i)
            out += (i ? ", " : "") + placements[i].text();
        out += ")";
    }
    const bool named = dimNames.size() == meshShape.size() && !meshShape.empty();
    out += named ? " on " : " on mesh ";
    for (size_t i = 0; i < meshShape.size(); ++i) {
        if (i)
            out += " \u00d7 ";
        if (named)
            out += dimNames[i] + "=";
        out += std::to_string(meshShape[i]);
    }
    return out;
}

std::string boxText(const Shape& offsets, const Shape& shape)
{
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        const std::int64_t begin = i < offsets.size() ? offsets[i] : 0;
        out += (i ? ", " : "") + std::to_string(begin) + ":" + std::to_string(begin + shape[i]);
    }
    return out + "]";
}

} // namespace tessera
