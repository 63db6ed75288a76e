// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "model/checkpoint.h"

#include <QString>

#include <cstdint>
#include <vector>

namespace tessera::ui {

/// A half-open rectangle [row0, row1) × [col0, col1) in the folded 2-D tensor.
struct FoldedRect {
    std::int64_t row0 = 0, col0 = 0, row1 = 0, col1 = 0;
    bool contains(std::int64_t row, std::int64_t col) const { return row >= row0 && row < row1 && col >= col0 && col < col1; }
    bool operator==(const FoldedRect& o) const { return row0 == o.row0 && col0 == o.col0 && row1 == o.row1 && col1 == o.col1; }
};

/// A tensor's pieces in two dimensions, computed once per selected tensor (no painting, so it is testable).
///
/// The last dim becomes the columns; all leading dims are folded row-major into the rows, so a box of an N-D
/// tensor becomes one rectangle per run of contiguous folded rows. A 1-D tensor is a single row (a bar), a 0-dim
/// tensor a single cell. Gaps and overlaps are found exactly on the boundaries of the rectangles (coordinate
/// compression), which stays cheap for the few thousand pieces a tensor can have.
struct PlacementGeometry {
    struct PieceRects {
        int piece = -1;                 ///< index into TensorInfo::pieces
        std::vector<FoldedRect> rects;  ///< empty for a zero-size box
        std::vector<int> replicas;      ///< Replica pieces with the same box (listed on this Primary piece)
        bool approximate = false;       ///< too many runs: `rects` is the bounding rectangle
    };

    std::int64_t rows = 0;
    std::int64_t cols = 0;
    int dims = 0;
    QString rowAxis; ///< "dim 0", "dims 0–1 (folded)", "" for 1-D and 0-dim tensors
    QString colAxis; ///< "dim 1"
    std::vector<PieceRects> pieces; ///< Primary and PartialTerm pieces, plus replicas without a primary
    std::vector<FoldedRect> gaps;
    std::vector<FoldedRect> overlaps;
    bool coverageChecked = false;   ///< false when there were too many boundaries to check in 2-D

    static PlacementGeometry compute(const tessera::TensorInfo& tensor);
    /// The piece entry under (row, col), -1 if none (the last drawn wins, as in the painting).
    int pieceAt(std::int64_t row, std::int64_t col) const;
};

} // namespace tessera::ui
