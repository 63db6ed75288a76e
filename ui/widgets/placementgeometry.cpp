// SPDX-License-Identifier: GPL-3.0-or-later
#include "placementgeometry.h"

#include <QCoreApplication>

#include <algorithm>

namespace tessera::ui {

namespace {

constexpr std::size_t kMaxRunsPerPiece = 4096;
constexpr std::size_t kMaxCoverageCells = 4'000'000;

using Interval = std::pair<std::int64_t, std::int64_t>;

/// Tensors with more dims than this are not folded into rows (no model weight has more than a handful).
constexpr std::size_t kMaxDrawnDims = 16;

/// Folded row intervals of the box over dims [d, last] of the leading dims. Appends to `out`; returns false once
/// the run limit is exceeded.
bool foldRows(const tessera::Shape& global, const tessera::Shape& offsets, const tessera::Shape& shape, std::size_t d,
              std::size_t last, std::int64_t base, std::vector<Interval>& out)
{
    std::int64_t inner = 1;
    bool innerFull = true;
    for (std::size_t k = d + 1; k <= last; ++k) {
        inner *= global[k];
        innerFull = innerFull && offsets[k] == 0 && shape[k] == global[k];
    }
    if (innerFull) {
        const std::int64_t begin = base + offsets[d] * inner;
        const std::int64_t end = base + (offsets[d] + shape[d]) * inner;
        if (!out.empty() && out.back().second == begin)
            out.back().second = end;
        else
            out.emplace_back(begin, end);
        return out.size() <= kMaxRunsPerPiece;
    }
    for (std::int64_t i = offsets[d]; i < offsets[d] + shape[d]; ++i) {
        if (!foldRows(global, offsets, shape, d + 1, last, base + i * inner, out))
            return false;
    }
    return true;
}

bool validBox(const tessera::Shape& global, const tessera::Piece& piece)
{
    if (piece.offsets.size() != global.size() || piece.shape.size() != global.size())
        return false;
    for (std::size_t k = 0; k < global.size(); ++k) {
        if (piece.shape[k] <= 0 || piece.offsets[k] < 0)
            return false;
    }
    return true;
}

/// Rectangles of a piece clipped to the tensor; pieces reaching outside are clipped here and reported by the
/// core's coverage check.
std::vector<FoldedRect> rectsOf(const tessera::Shape& global, const tessera::Piece& piece, bool& approximate)
{
    approximate = false;
    const std::size_t n = global.size();
    if (n == 0)
        return { FoldedRect { 0, 0, 1, 1 } };
    if (n > kMaxDrawnDims) {
        // Folding recurses once per dim and multiplies the sizes of all but the last: a 10,000-dim tensor from a
        // hostile file would overflow both. Such a tensor is drawn as one approximate block.
        approximate = true;
        return { FoldedRect { 0, 0, 1, 1 } };
    }
    if (!validBox(global, piece))
        return {};
    tessera::Shape offsets = piece.offsets;
    tessera::Shape shape = piece.shape;
    for (std::size_t k = 0; k < n; ++k) {
        if (offsets[k] >= global[k])
            return {};
        shape[k] = std::min(shape[k], global[k] - offsets[k]);
    }
    const std::int64_t col0 = offsets[n - 1];
    const std::int64_t col1 = col0 + shape[n - 1];
    if (n == 1)
        return { FoldedRect { 0, col0, 1, col1 } };
    std::vector<Interval> runs;
    if (!foldRows(global, offsets, shape, 0, n - 2, 0, runs)) {
        approximate = true;
        runs.clear();
        // Bounding rows: first row of the box to its last row.
        std::int64_t lo = 0, hi = 0, stride = 1;
        for (std::size_t k = n - 1; k-- > 0;) {
            lo += offsets[k] * stride;
            hi += (offsets[k] + shape[k] - 1) * stride;
            stride *= global[k];
        }
        runs.emplace_back(lo, hi + 1);
    }
    std::vector<FoldedRect> rects;
    rects.reserve(runs.size());
    for (const auto& [r0, r1] : runs)
        rects.push_back({ r0, col0, r1, col1 });
    return rects;
}

QString dimsText(int first, int last)
{
    if (first == last)
        return QCoreApplication::translate("PlacementGeometry", "dim %1").arg(first);
    return QCoreApplication::translate("PlacementGeometry", "dims %1–%2 folded").arg(first).arg(last);
}

/// The grid the tensor is drawn on: its last dimension across, the others folded into rows.
void foldAxes(PlacementGeometry& g, const tessera::Shape& global)
{
    g.dims = static_cast<int>(global.size());
    if (global.empty() || global.size() > kMaxDrawnDims) {
        g.rows = g.cols = 1;
    } else {
        g.cols = std::max<std::int64_t>(0, global.back());
        g.rows = 1;
        for (std::size_t k = 0; k + 1 < global.size(); ++k)
            g.rows *= std::max<std::int64_t>(0, global[k]);
        g.colAxis = dimsText(g.dims - 1, g.dims - 1);
        if (g.dims >= 2)
            g.rowAxis = dimsText(0, g.dims - 2);
    }
}

void placePieces(PlacementGeometry& g, const tessera::TensorInfo& tensor)
{
    const auto& global = tensor.shape;
    // Primary and partial-term pieces are drawn; replicas are attached to the primary with the same box.
    std::vector<int> replicas;
    for (std::size_t p = 0; p < tensor.pieces.size(); ++p) {
        const auto& piece = tensor.pieces[p];
        if (piece.role == tessera::PieceRole::Replica) {
            replicas.push_back(static_cast<int>(p));
            continue;
        }
        PlacementGeometry::PieceRects entry;
        entry.piece = static_cast<int>(p);
        entry.rects = rectsOf(global, piece, entry.approximate);
        g.pieces.push_back(std::move(entry));
    }
    for (const int r : replicas) {
        const auto& replica = tensor.pieces[r];
        auto match = std::find_if(g.pieces.begin(), g.pieces.end(), [&](const PlacementGeometry::PieceRects& e) {
            const auto& primary = tensor.pieces[e.piece];
            return primary.role == tessera::PieceRole::Primary && primary.offsets == replica.offsets
                && primary.shape == replica.shape;
        });
        if (match != g.pieces.end()) {
            match->replicas.push_back(r);
        } else {
            PlacementGeometry::PieceRects entry;
            entry.piece = r;
            entry.rects = rectsOf(global, replica, entry.approximate);
            g.pieces.push_back(std::move(entry));
        }
    }
}

std::vector<FoldedRect> coveringBoxes(const PlacementGeometry& g, const tessera::TensorInfo& tensor)
{
    // Coverage: every element must be covered by exactly one primary box or one partial-term box (the terms of
    // a Partial placement share their box, so identical partial boxes count once).
    std::vector<FoldedRect> covering;
    for (const auto& entry : g.pieces) {
        const auto& piece = tensor.pieces[entry.piece];
        if (piece.role == tessera::PieceRole::Replica || entry.approximate)
            continue;
        for (const auto& rect : entry.rects) {
            if (piece.role == tessera::PieceRole::PartialTerm
                && std::find(covering.begin(), covering.end(), rect) != covering.end())
                continue;
            covering.push_back(rect);
        }
    }
    return covering;
}

/// Counts how often each cell of the grid is covered and records the uncovered (gaps) and doubly covered
/// (overlaps) ones; skipped when the grid compressed at the boxes' edges is still too large to count.
void findGapsAndOverlaps(PlacementGeometry& g, const std::vector<FoldedRect>& covering)
{
    std::vector<std::int64_t> rowCuts { 0, g.rows }, colCuts { 0, g.cols };
    for (const auto& r : covering) {
        rowCuts.push_back(r.row0);
        rowCuts.push_back(r.row1);
        colCuts.push_back(r.col0);
        colCuts.push_back(r.col1);
    }
    for (auto* cuts : { &rowCuts, &colCuts }) {
        std::sort(cuts->begin(), cuts->end());
        cuts->erase(std::unique(cuts->begin(), cuts->end()), cuts->end());
    }
    const std::size_t nr = rowCuts.size() - 1, nc = colCuts.size() - 1;
    if (nr * nc > kMaxCoverageCells)
        return;
    g.coverageChecked = true;
    // 2-D difference array over the compressed grid, then prefix sums give the cover count of every cell.
    std::vector<int> count((nr + 1) * (nc + 1), 0);
    auto at = [&](std::size_t i, std::size_t j) -> int& { return count[i * (nc + 1) + j]; };
    auto rowIndex = [&](std::int64_t v) { return std::size_t(std::lower_bound(rowCuts.begin(), rowCuts.end(), v) - rowCuts.begin()); };
    auto colIndex = [&](std::int64_t v) { return std::size_t(std::lower_bound(colCuts.begin(), colCuts.end(), v) - colCuts.begin()); };
    for (const auto& r : covering) {
        const auto i0 = rowIndex(r.row0), i1 = rowIndex(r.row1), j0 = colIndex(r.col0), j1 = colIndex(r.col1);
        at(i0, j0) += 1;
        at(i0, j1) -= 1;
        at(i1, j0) -= 1;
        at(i1, j1) += 1;
    }
    for (std::size_t i = 0; i <= nr; ++i)
        for (std::size_t j = 0; j <= nc; ++j)
            at(i, j) += (i ? at(i - 1, j) : 0) + (j ? at(i, j - 1) : 0) - (i && j ? at(i - 1, j - 1) : 0);
    // Merge horizontal runs of equal state so a gap is one rectangle per row band, not one per cell.
    for (std::size_t i = 0; i < nr; ++i) {
        std::size_t j = 0;
        while (j < nc) {
            const int c = at(i, j);
            std::size_t k = j + 1;
            while (k < nc && ((c == 0) == (at(i, k) == 0)) && ((c > 1) == (at(i, k) > 1)))
                ++k;
            const FoldedRect rect { rowCuts[i], colCuts[j], rowCuts[i + 1], colCuts[k] };
            if (c == 0)
                g.gaps.push_back(rect);
            else if (c > 1)
                g.overlaps.push_back(rect);
            j = k;
        }
    }
}

} // namespace

PlacementGeometry PlacementGeometry::compute(const tessera::TensorInfo& tensor)
{
    PlacementGeometry g;
    foldAxes(g, tensor.shape);
    placePieces(g, tensor);
    if (g.rows == 0 || g.cols == 0)
        return g;
    findGapsAndOverlaps(g, coveringBoxes(g, tensor));
    return g;
}

int PlacementGeometry::pieceAt(std::int64_t row, std::int64_t col) const
{
    for (std::size_t e = pieces.size(); e-- > 0;) {
        for (const auto& rect : pieces[e].rects) {
            if (rect.contains(row, col))
                return static_cast<int>(e);
        }
    }
    return -1;
}

} // namespace tessera::ui
